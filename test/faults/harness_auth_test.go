package faults

import (
	"path/filepath"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/natsauth"
	"github.com/switchback-dev/switchback/natsembed"
	"github.com/switchback-dev/switchback/topology"
)

// runNodes are the nodes of both worlds (sim.ThreeNodes, longhornWorld),
// known before NATS starts because each has a NATS account of its own.
var runNodes = []string{"n1", "n2", "n3"}

// authorize gives the run the NATS authorization `switchback nats-auth
// --node n1,n2,n3 --sim` writes, in its default layout: the controller in
// Switchback's account, each worker alone in its node's account reaching the
// streams through its imports, the reader alone in its own. Every run's
// faults meet the production shape: a reconnect, a server restart or an
// election has to pass through the imports too. The credentials are written
// under the run's directory for the processes; the servers (a restart
// included) load the configuration through w.configure.
func (w *world) authorize() {
	auth, err := natsauth.Generate(natsauth.Config{Nodes: runNodes, Account: natsauth.DefaultAccount, NodeAccounts: true,
		WorkerExtraPublish: []string{topology.SimSubjects}})
	require.NoError(w.t, err)
	require.NoError(w.t, auth.WriteFiles(w.authDir()))
	w.auth = auth
}

// configure loads the run's authorization into a server's options.
func (w *world) configure(o *natsembed.Options) { o.Configure = w.auth.Configure }

// authDir holds the run's credential files (natsauth.WriteFiles' layout).
func (w *world) authDir() string { return filepath.Join(w.dir, "nats-auth") }

// controllerConnect is how the test's own connection authenticates: as the
// controller, in the streams' account (it serves the simulator and reads
// the history there).
func (w *world) controllerConnect() []nats.Option {
	opts, err := w.auth.Controller.ConnectOptions()
	require.NoError(w.t, err)
	return opts
}

// credentialFlags authenticate a process: the controller (node ""), node's
// worker, or the reader (reader true), each with what nats-auth wrote for
// it; a worker and the reader reach JetStream under their imports' prefix.
func (w *world) credentialFlags(node string, reader bool) []string {
	prefix := []string{"--nats-api-prefix", strings.TrimSuffix(topology.NodeAPIPrefix, ".")}
	switch {
	case reader:
		return append([]string{"--nats-nkey", filepath.Join(w.authDir(), natsauth.ReaderDir, "reader.nk")}, prefix...)
	case node == "":
		return []string{"--nats-nkey", filepath.Join(w.authDir(), natsauth.ControllerDir, "controller.nk")}
	default:
		return append([]string{"--nats-nkey", filepath.Join(w.authDir(), natsauth.WorkersDir, node+".nk")}, prefix...)
	}
}
