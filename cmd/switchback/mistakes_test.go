package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/natsembed"
	"github.com/switchback-dev/switchback/test/harness/testenv"
)

// TestMistakesAboutNATSSayWhatToDo: a NATS that does not answer, one that
// holds no Switchback history, an empty history and a manager name no event
// carries each get an error (or, for the empty history, a note) saying
// what is wrong and what to check.
func TestMistakesAboutNATSSayWhatToDo(t *testing.T) {
	empty, err := natsembed.Start(natsembed.Options{StoreDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(empty.Shutdown)

	withStreams, err := natsembed.Start(natsembed.Options{StoreDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(withStreams.Shutdown)
	nc, err := withStreams.Connect()
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = eventstore.Open(ctx, js, eventstore.Config{}) // what a controller does first
	require.NoError(t, err)

	demo := t.TempDir()
	code, out, errOut := runCmd(t, 2*time.Minute, "demo", "--nodes", "2", "--volumes", "2", "--latency", "1ms", "--data-dir", demo)
	require.Equal(t, 0, code, "%s\n%s", out, errOut)

	cases := []struct {
		name   string
		args   []string
		code   int
		stderr []string
	}{
		{"unreachable NATS", []string{"replay", "--nats-url", "nats://127.0.0.1:1"}, 1,
			[]string{"no NATS server answers at nats://127.0.0.1:1", "check --nats-url", "port-forward svc/switchback-nats"}},
		{"history, unreachable NATS", []string{"history", "m", "--nats-url", "nats://127.0.0.1:1"}, 1,
			[]string{"no NATS server answers at nats://127.0.0.1:1"}},
		{"a NATS without Switchback", []string{"replay", "--nats-url", empty.ClientURL()}, 1,
			[]string{"holds no Switchback history", "has a controller started on it?"}},
		{"an empty history", []string{"replay", "--nats-url", withStreams.ClientURL()}, 0,
			[]string{"note: the stream holds no event"}},
		{"replay of an unknown manager", []string{"replay", "--data-dir", demo, "--manager", "nobody"}, 1,
			[]string{`no events for manager "nobody" in any namespace`, "`switchback replay` lists every upgrade"}},
		{"history of an unknown manager", []string{"history", "nobody", "-n", "longhorn-system", "--data-dir", demo}, 1,
			[]string{`no events for manager "nobody" in namespace longhorn-system`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCmd(t, time.Minute, tc.args...)
			assert.Equal(t, tc.code, code, "%s\n%s", out, errOut)
			for _, s := range tc.stderr {
				assert.Contains(t, errOut, s)
			}
		})
	}
}

// TestMistakesAboutTheClusterSayWhatToDo: a kubeconfig whose user may not
// read the managers, one whose credentials the apiserver refuses, and one
// naming no reachable apiserver each say so and what to check.
func TestMistakesAboutTheClusterSayWhatToDo(t *testing.T) {
	env := testenv.Get(t)
	base, err := clientcmd.LoadFromFile(env.Kubeconfig)
	require.NoError(t, err)
	variant := func(name string, change func(c *clientcmdapi.Config)) string {
		c := base.DeepCopy()
		change(c)
		path := filepath.Join(t.TempDir(), name)
		require.NoError(t, clientcmd.WriteToFile(*c, path))
		return path
	}
	forbidden := variant("forbidden", func(c *clientcmdapi.Config) {
		for _, u := range c.AuthInfos {
			u.Impersonate = "someone-without-rights"
		}
	})
	unauthorized := variant("unauthorized", func(c *clientcmdapi.Config) {
		for _, u := range c.AuthInfos {
			u.ClientCertificateData, u.ClientKeyData, u.Token = nil, nil, "not-a-token"
		}
	})
	unreachable := variant("unreachable", func(c *clientcmdapi.Config) {
		for _, cl := range c.Clusters {
			cl.Server = "https://127.0.0.1:1"
		}
	})
	cases := []struct {
		name       string
		kubeconfig string
		stderr     []string
	}{
		{"forbidden", forbidden, []string{"list the DataEngineUpgradeManagers in longhorn-system: the kubeconfig's user may not", "kubectl auth can-i --list"}},
		{"unauthorized", unauthorized, []string{"refused the kubeconfig's credentials"}},
		{"unreachable", unreachable, []string{"cannot reach the cluster at https://127.0.0.1:1", "kubectl cluster-info"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCmd(t, time.Minute, "uninstall", "--kubeconfig", tc.kubeconfig)
			assert.Equal(t, 1, code, "%s\n%s", out, errOut)
			for _, s := range tc.stderr {
				assert.Contains(t, errOut, s)
			}
		})
	}
}
