package nodeaccounts

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/natsauth"
	"github.com/switchback-dev/switchback/natsauth/callout"
)

// testLayout is a layout with fresh keys and no node.
func testLayout(t testing.TB) (natsauth.Layout, *natsauth.Authorization) {
	t.Helper()
	keys, err := callout.GenerateKeys()
	require.NoError(t, err)
	side, err := keys.Server(0)
	require.NoError(t, err)
	auth, err := natsauth.Generate(natsauth.Config{Account: natsauth.DefaultAccount, NodeAccounts: true, Callout: side})
	require.NoError(t, err)
	l, err := auth.Layout()
	require.NoError(t, err)
	return l, auth
}

func TestDesired(t *testing.T) {
	layout, first := testLayout(t)
	render := func(nodes ...string) []byte {
		a, err := layout.Render(nodes)
		require.NoError(t, err)
		return []byte(a.ServerConfig())
	}
	for _, tc := range []struct {
		name    string
		nodes   []string
		current map[string][]byte
		changed bool
		list    string
	}{
		{"the generator's Secret, no node yet", nil, map[string][]byte{natsauth.ServerSecretKey: []byte(first.ServerConfig())}, true, "\n"},
		{"the generator's Secret, nodes", []string{"n2", "n1"}, map[string][]byte{natsauth.ServerSecretKey: []byte(first.ServerConfig())}, true, "n1\nn2\n"},
		{"already rendered", []string{"n1", "n2"}, map[string][]byte{natsauth.ServerSecretKey: render("n1", "n2"), NodesKey: []byte("n1\nn2\n")}, false, "n1\nn2\n"},
		{"listed twice", []string{"n1", "n1"}, map[string][]byte{natsauth.ServerSecretKey: render("n1"), NodesKey: []byte("n1\n")}, false, "n1\n"},
		{"a node joins", []string{"n1", "n2", "n3"}, map[string][]byte{natsauth.ServerSecretKey: render("n1", "n2"), NodesKey: []byte("n1\nn2\n")}, true, "n1\nn2\nn3\n"},
		{"a node leaves", []string{"n2"}, map[string][]byte{natsauth.ServerSecretKey: render("n1", "n2"), NodesKey: []byte("n1\nn2\n")}, true, "n2\n"},
		{"the list alone edited", []string{"n1"}, map[string][]byte{natsauth.ServerSecretKey: render("n1"), NodesKey: []byte("n1\nn9\n")}, true, "n1\n"},
		{"another key is kept", []string{"n1"}, map[string][]byte{natsauth.ServerSecretKey: render("n1"), NodesKey: []byte("n1\n"), "other": []byte("x")}, false, "n1\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, changed, err := desired(layout, tc.nodes, tc.current)
			require.NoError(t, err)
			assert.Equal(t, tc.changed, changed)
			assert.Equal(t, tc.list, string(got[NodesKey]))
			assert.Equal(t, string(render(parseNodes(got)...)), string(got[natsauth.ServerSecretKey]))
			for k, v := range tc.current {
				if k != NodesKey && k != natsauth.ServerSecretKey {
					assert.Equal(t, v, got[k], "key %s kept", k)
				}
			}
		})
	}
	_, _, err := desired(layout, []string{"Bad_Node"}, nil)
	assert.Error(t, err)
}
