package nodeaccounts

import (
	"bytes"
	"slices"
	"strings"

	"github.com/switchback-dev/switchback/natsauth"
)

// NodesKey is the key of the servers' authorization Secret
// (natsauth.ServerSecretName) that lists, one per line, the nodes whose
// accounts its configuration holds: what the callout of every controller
// replica places workers by.
const NodesKey = "node-accounts"

// desired is the Secret data that gives each of nodes its account under
// layout, and whether current differs from it. Other keys of current are
// kept.
func desired(layout natsauth.Layout, nodes []string, current map[string][]byte) (map[string][]byte, bool, error) {
	nodes = slices.Sorted(slices.Values(nodes))
	nodes = slices.Compact(nodes)
	auth, err := layout.Render(nodes)
	if err != nil {
		return nil, false, err
	}
	want := map[string][]byte{
		natsauth.ServerSecretKey: []byte(auth.ServerConfig()),
		NodesKey:                 []byte(strings.Join(nodes, "\n") + "\n"),
	}
	out := make(map[string][]byte, len(current)+len(want))
	changed := false
	for k, v := range current {
		out[k] = v
	}
	for k, v := range want {
		if !bytes.Equal(current[k], v) {
			changed = true
		}
		out[k] = v
	}
	return out, changed, nil
}

// parseNodes reads NodesKey's value; nil when the Secret has none (a
// configuration the generator wrote, before the controller rendered one).
func parseNodes(data map[string][]byte) []string {
	b, ok := data[NodesKey]
	if !ok {
		return nil
	}
	return append([]string{}, strings.Fields(string(b))...)
}
