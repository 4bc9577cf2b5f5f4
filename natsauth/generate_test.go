package natsauth_test

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/natsauth"
	"github.com/switchback-dev/switchback/topology"
)

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

func TestGenerateRefusesBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  natsauth.Config
		want string
	}{
		{"no node", natsauth.Config{}, "at least one node"},
		{"duplicate node", natsauth.Config{Nodes: []string{"n1", "n1"}}, `node "n1" is listed twice`},
		{"not a node name", natsauth.Config{Nodes: []string{"Node_1"}}, `node "Node_1"`},
		{"too long", natsauth.Config{Nodes: []string{strings.Repeat("a", 254)}}, "must be no more than 253"},
		{"unknown mode", natsauth.Config{Nodes: []string{"n1"}, Mode: "token"}, `unknown mode "token"`},
		{"bad account", natsauth.Config{Nodes: []string{"n1"}, Account: "a b"}, `account "a b"`},
		{"existing nkey not a user key", natsauth.Config{Nodes: []string{"n1"}, Existing: map[string]natsauth.Credential{"n1": {NKey: "SUAXXX"}}}, "not a public user key"},
		{"extra subject with a space", natsauth.Config{Nodes: []string{"n1"}, WorkerExtraPublish: []string{"a b"}}, "whitespace"},
		{"extra subject with '>' inside", natsauth.Config{Nodes: []string{"n1"}, WorkerExtraPublish: []string{"a.>.b"}}, "'>' must be the last token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := natsauth.Generate(tc.cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestServerConfigHoldsNoSecret: the snippet may go into a ConfigMap.
func TestServerConfigHoldsNoSecret(t *testing.T) {
	for _, mode := range []natsauth.Mode{natsauth.ModeNKey, natsauth.ModePassword} {
		a, err := natsauth.Generate(natsauth.Config{Nodes: []string{"n1", "n2"}, Mode: mode, BcryptCost: 4})
		require.NoError(t, err)
		text := a.ServerConfig()
		for _, u := range append(a.Workers, a.Controller, a.Reader) {
			if len(u.Credential.Seed) > 0 {
				assert.NotContains(t, text, string(u.Credential.Seed), "no seed in the config")
				assert.Contains(t, text, u.Credential.NKey)
			}
			if u.Credential.Password != "" {
				assert.NotContains(t, text, u.Credential.Password, "no clear password in the config")
				assert.Contains(t, text, u.Credential.PasswordHash)
			}
		}
		var o server.Options
		require.NoError(t, a.Apply(&o), "nats-server loads it")
		assert.Len(t, append(o.Users, toUsers(o.Nkeys)...), 4, "the controller, the reader and two workers")
	}
}

func toUsers(n []*server.NkeyUser) []*server.User {
	out := make([]*server.User, len(n))
	for i := range n {
		out[i] = &server.User{Username: n[i].Nkey}
	}
	return out
}

// TestExistingCredentialsAreKept: regenerating for a new node does not
// rotate everybody's keys.
func TestExistingCredentialsAreKept(t *testing.T) {
	first, err := natsauth.Generate(natsauth.Config{Nodes: []string{"n1"}})
	require.NoError(t, err)
	n1, _ := first.Worker("n1")
	second, err := natsauth.Generate(natsauth.Config{Nodes: []string{"n1", "n2"}, Existing: map[string]natsauth.Credential{
		"":                 first.Controller.Credential,
		natsauth.ReaderKey: first.Reader.Credential,
		"n1":               {NKey: n1.Credential.NKey}, // public key only: the seed stays where it is
	}})
	require.NoError(t, err)
	again, _ := second.Worker("n1")
	assert.Equal(t, n1.Credential.NKey, again.Credential.NKey)
	assert.Equal(t, first.Controller.Credential.NKey, second.Controller.Credential.NKey)
	assert.Equal(t, first.Reader.Credential.Seed, second.Reader.Credential.Seed, "the reader's key is kept too")
	assert.Contains(t, second.ServerConfig(), first.Reader.Credential.NKey)
	assert.NotContains(t, second.SecretData(), second.SecretKey("n1"), "no seed to write for a worker kept by public key")
	assert.Contains(t, second.SecretData(), second.SecretKey("n2"))

	_, err = natsauth.Generate(natsauth.Config{Nodes: []string{"n1"}, Existing: map[string]natsauth.Credential{
		"n1": {NKey: n1.Credential.NKey, Seed: first.Controller.Credential.Seed},
	}})
	require.ErrorContains(t, err, "does not belong to nkey")
}

// TestSecretSeedFileConnects: the Secret's file is exactly what
// --nats-nkey reads (nats.NkeyOptionFromSeed), and it opens the worker's
// own consumer.
func TestSecretSeedFileConnects(t *testing.T) {
	d := newDeployment(t, natsauth.Config{Nodes: []string{"n1", "node-2.example.com"}})
	dir := t.TempDir()
	for k, v := range d.auth.SecretData() {
		require.NoError(t, os.WriteFile(filepath.Join(dir, k), v, 0o600))
	}
	node := "node-2.example.com"
	seedOpt, err := nats.NkeyOptionFromSeed(filepath.Join(dir, node+".nk"))
	require.NoError(t, err)
	v := &natsauth.Violations{}
	nc, err := d.srv.Connect(append(natsauth.WorkerOptions(node), seedOpt, v.Option())...)
	require.NoError(t, err)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	_, err = js.Consumer(d.ctx, topology.CommandStream, topology.NodeConsumer(node))
	require.NoError(t, err)
	assert.Empty(t, v.All())
	assert.Equal(t, map[string][]byte{"controller.nk": append(append([]byte(nil), d.auth.Controller.Credential.Seed...), '\n')}, d.auth.ControllerSecretData())
}

// TestConfigureFailsClosed: should the configuration not load, the embedded
// server lets nobody in rather than everybody.
func TestConfigureFailsClosed(t *testing.T) {
	var zero natsauth.Authorization
	var o server.Options
	require.Error(t, zero.Apply(&o), "an empty authorization is not a configuration")
	zero.Configure(&o)
	assert.NotEmpty(t, o.Authorization, "a random token nobody knows")
}

func TestSecretsAndFiles(t *testing.T) {
	long := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 61)
	a, err := natsauth.Generate(natsauth.Config{Nodes: []string{"n1", long}})
	require.NoError(t, err)

	all := a.Secrets("longhorn-system", natsauth.SharedSecret)
	require.Len(t, all, 4)
	assert.Equal(t, natsauth.ServerSecretName, all[0].Name)
	assert.Equal(t, map[string][]byte{natsauth.ServerSecretKey: []byte(a.ServerConfig())}, all[0].Data, "the servers' side, which deploy/nats mounts")
	shared := all[1:]
	assert.Equal(t, natsauth.ControllerSecretName, shared[0].Name)
	assert.Equal(t, natsauth.ReaderSecretName, shared[1].Name)
	assert.Equal(t, map[string][]byte{"reader.nk": append(append([]byte(nil), a.Reader.Credential.Seed...), '\n')}, shared[1].Data,
		"the reader's seed file, for --nats-nkey and the nats CLI's --nkey")
	assert.Equal(t, natsauth.WorkersSecretName, shared[2].Name)
	assert.Len(t, shared[2].Data, 2)
	assert.Contains(t, shared[2].Data, "n1.nk")
	for k := range shared[2].Data {
		assert.Empty(t, validation.IsConfigMapKey(k), "valid Secret key %q", k)
	}

	per := a.Secrets("longhorn-system", natsauth.SecretPerWorker)
	require.Len(t, per, 5)
	for _, s := range per[3:] {
		assert.Empty(t, validation.IsDNS1123Subdomain(s.Name), "valid Secret name %q", s.Name)
		assert.Equal(t, []string{"worker.nk"}, slices.Collect(maps.Keys(s.Data)))
	}
	assert.Equal(t, "switchback-nats-worker-n1", natsauth.WorkerSecretName("n1"))

	dir := t.TempDir()
	require.NoError(t, a.WriteFiles(dir))
	conf, err := os.ReadFile(filepath.Join(dir, natsauth.ConfigFile))
	require.NoError(t, err)
	assert.Equal(t, a.ServerConfig(), string(conf))
	for _, f := range []string{filepath.Join(natsauth.WorkersDir, "n1.nk"), filepath.Join(natsauth.ControllerDir, "controller.nk"), filepath.Join(natsauth.ReaderDir, "reader.nk")} {
		fi, err := os.Stat(filepath.Join(dir, f))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "%s is private", f)
	}
}

func TestNodeAccountsLayout(t *testing.T) {
	for _, tc := range []struct {
		cfg  natsauth.Config
		want string
	}{
		{natsauth.Config{Nodes: []string{"n1"}, NodeAccounts: true}, "node accounts need an account"},
		// With the callout, the nodes whose accounts it places workers in
		// (none: the controller renders them, natsauth.Layout).
		{natsauth.Config{Account: natsauth.DefaultAccount, NodeAccounts: true, Callout: &natsauth.Callout{}, Nodes: []string{"Bad_Node"}}, `node "Bad_Node"`},
	} {
		_, err := natsauth.Generate(tc.cfg)
		require.ErrorContains(t, err, tc.want, "%+v", tc.cfg)
	}

	nodes := []string{"n1", "n1.example.com", "n2"}
	a, err := natsauth.Generate(natsauth.Config{Nodes: nodes, Account: natsauth.DefaultAccount, NodeAccounts: true})
	require.NoError(t, err)
	text := a.ServerConfig()
	// block is node's account's block of the configuration.
	block := func(node string) string {
		start := strings.Index(text, strconv.Quote(natsauth.NodeAccount(natsauth.DefaultAccount, node))+" {")
		require.GreaterOrEqual(t, start, 0, "node %s has an account", node)
		rest := text[start+1:]
		if end := strings.Index(rest, "\n  \""); end >= 0 {
			rest = rest[:end]
		}
		return rest
	}
	for _, n := range nodes {
		w, ok := a.Worker(n)
		require.True(t, ok)
		assert.Equal(t, topology.NodeAPIPrefix, a.APIPrefix(w))
		b := block(n)
		assert.Contains(t, b, strconv.Quote(w.Credential.NKey), "the worker of %s is in its account", n)
		assert.Contains(t, b, strconv.Quote(topology.NodeAPIPrefix+"CONSUMER.MSG.NEXT."+topology.CommandStream+"."+topology.NodeConsumer(n)), "%s pulls its own commands", n)
		for _, other := range nodes {
			if other == n {
				continue
			}
			assert.NotContains(t, b, "."+topology.NodeConsumer(other)+"\"", "%s imports nothing of %s's consumer", n, other)
			assert.NotContains(t, b, strconv.Quote(events.NodeSubjects(other)), "%s imports nothing of %s's events", n, other)
		}
		assert.NotContains(t, b, "jetstream", "a node account has no JetStream")
	}
	assert.Empty(t, a.APIPrefix(a.Controller), "the controller stays in the streams' account")
	assert.Equal(t, 1, strings.Count(text, strconv.Quote(a.Workers[0].Credential.NKey)), "a worker is in one account only")
}
