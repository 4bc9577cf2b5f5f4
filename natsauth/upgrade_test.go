package natsauth_test

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/commands"
	"github.com/switchback-dev/switchback/commands/intake"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/natsauth"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/test/harness/enginetest"
	"github.com/switchback-dev/switchback/topology"
)

// cluster builds a v2 cluster on nodes with attached volumes whose targets
// sit on every node (so every node has targets to move) and a detached one.
func cluster(t *testing.T, nodes ...string) *sim.Sim {
	t.Helper()
	s := sim.New(sim.Config{Profile: dataplane.ProfileInPlace, TargetMoveLatency: 5 * time.Millisecond, IMStartLatency: 10 * time.Millisecond, RebuildLatency: 5 * time.Millisecond})
	for _, n := range nodes {
		require.NoError(t, s.AddNode(n))
	}
	for i := range nodes {
		on := []string{nodes[i], nodes[(i+1)%len(nodes)]}
		require.NoError(t, s.AddVolume(fmt.Sprintf("vol-%d", i), sim.EngineV2, on, nodes[i]))
	}
	require.NoError(t, s.AddVolume("vol-detached", sim.EngineV2, nodes[:2], ""))
	return s
}

// runUpgrade runs a whole upgrade of every node of c on d, each worker as
// its own user, and returns the manager's final state.
func runUpgrade(t *testing.T, d *deployment, c *sim.Sim, ref events.ManagerRef, during func()) (manager.State, []*worker) {
	t.Helper()
	var workers []*worker
	for _, n := range d.auth.Nodes() {
		workers = append(workers, d.runWorker(n, c))
	}
	d.runOrchestrator(c)
	if during != nil {
		during()
	}
	x := commands.New(commands.Config{Store: d.store, Source: events.SourceIntake})
	_, err := intake.RequestUpgrade(d.ctx, x, ref, 1, v1beta2.DataEngineUpgradeManagerSpec{DataEngine: v1beta2.DataEngineTypeV2})
	require.NoError(t, err)
	var st manager.State
	eventually(t, 45*time.Second, "the upgrade ends", func() bool {
		l, err := x.Managers.Load(d.ctx, events.ManagerAggregate(ref))
		require.NoError(t, err)
		st = l.State
		return st.Terminal()
	})
	return st, workers
}

// requireCompleted checks that the upgrade completed and that no worker was
// refused anything it needed on the way.
func requireCompleted(t *testing.T, st manager.State, workers []*worker) {
	t.Helper()
	require.Equal(t, events.ManagerCompleted, st.State, st.Message)
	for _, w := range workers {
		assert.Empty(t, w.viol.All(), "worker %s was refused nothing it needed", w.node)
	}
}

func history(t *testing.T, d *deployment, ref events.ManagerRef) []events.Envelope {
	t.Helper()
	var out []events.Envelope
	err := d.store.Scan(d.ctx, eventstore.ScanOptions{Subjects: []string{events.ManagerSubjectPrefix(ref) + ".>"}},
		func(e events.Envelope) error { out = append(out, e); return nil },
		func(de *events.DecodeError) { t.Errorf("parked: %v", de) })
	require.NoError(t, err)
	return out
}

// TestWholeUpgradeUnderPerNodeAuthorization runs a complete upgrade with
// the controller (orchestrator) on the controller user and each worker on
// its own nkey user bound with BindOnly: the engine needs nothing the
// authorization refuses. A dotted node name exercises the encoded tokens,
// and two bad commands on a worker's queue exercise the parking path under
// the worker's permissions.
func TestWholeUpgradeUnderPerNodeAuthorization(t *testing.T) {
	nodes := []string{"n1", "n2", "n3.example.com"}
	d := newDeployment(t, natsauth.Config{Nodes: nodes})
	ref := events.ManagerRef{Namespace: "longhorn-system", Name: "authz", UID: "uid-authz"}
	upgradeRefusingBadCommands(t, d, ref, nodes...)
	readAsReader(t, d, ref, 2)
}

// TestPasswordUsersInAnAccount: the same upgrade with user/password users
// in a dedicated account with JetStream under the default limits.
func TestPasswordUsersInAnAccount(t *testing.T) {
	nodes := []string{"a", "b"}
	d := newDeployment(t, natsauth.Config{Nodes: nodes, Mode: natsauth.ModePassword, Account: "SWITCHBACK", BcryptCost: 4})
	assert.Contains(t, d.auth.ServerConfig(), "max_streams: 4")
	c := cluster(t, nodes...)
	ref := events.ManagerRef{Namespace: "longhorn-system", Name: "pw", UID: "uid-pw"}
	st, workers := runUpgrade(t, d, c, ref, nil)
	requireCompleted(t, st, workers)
	// A worker's password does not open another worker's door.
	wa, _ := d.auth.Worker("a")
	wb, _ := d.auth.Worker("b")
	_, err := d.srv.Connect(nats.UserInfo(wb.Credential.User, wa.Credential.Password))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Authorization Violation")

	_, err = d.js.Publish(d.ctx, "sb.dlq.evt.test", []byte("a parked event"))
	require.NoError(t, err)
	readAsReader(t, d, ref, 1)
}

// TestWholeUpgradeOnAClusterUnderAuthorization: the same on a 3-server
// cluster with the streams at R3, where a worker's multi-event decisions
// are committed as atomic batches: the worker's permissions cover that path
// too.
func TestWholeUpgradeOnAClusterUnderAuthorization(t *testing.T) {
	nodes := []string{"n1", "n2", "n3"}
	auth, err := natsauth.Generate(natsauth.Config{Nodes: nodes})
	require.NoError(t, err)
	d := startClusterDeployment(t, auth)
	c := cluster(t, nodes...)
	ref := events.ManagerRef{Namespace: "longhorn-system", Name: "authz-r3", UID: "uid-authz-r3"}
	st, workers := runUpgrade(t, d, c, ref, nil)
	requireCompleted(t, st, workers)
	assert.Empty(t, d.viol.All())
	h := history(t, d, ref)
	for key, n := range enginetest.Transitions(h) {
		assert.Equal(t, 1, n, "transition %q appears once", key)
	}
	assert.Zero(t, c.IOStats().Failed)
	batched := map[string]int{}
	for _, e := range h {
		if e.Aggregate.IsNode() {
			batched[e.CausationID]++
		}
	}
	assert.True(t, slices.ContainsFunc(slices.Collect(maps.Values(batched)), func(n int) bool { return n > 1 }),
		"some worker decision appended several events (an atomic batch on R3)")
}

// upgradeRefusingBadCommands runs a whole upgrade of nodes on d with
// garbage and a command naming n2 on n1's queue: the upgrade completes
// with nothing refused that it needed, each transition once, no I/O failed,
// and both bad commands parked by the controller from the worker's refusal.
func upgradeRefusingBadCommands(t *testing.T, d *deployment, ref events.ManagerRef, nodes ...string) {
	t.Helper()
	c := cluster(t, nodes...)
	misrouted := command("n2", "misrouted")
	misrouted.Manager = ref
	st, workers := runUpgrade(t, d, c, ref, func() {
		// Garbage and a command naming another node, on n1's queue.
		_, err := d.js.Publish(d.ctx, topology.CommandSubject("n1"), []byte("{not json"))
		require.NoError(t, err)
		_, err = d.js.Publish(d.ctx, topology.CommandSubject("n1"), mustJSON(t, misrouted))
		require.NoError(t, err)
	})
	requireCompleted(t, st, workers)
	assert.Empty(t, d.viol.All(), "the controller was refused nothing")
	for key, n := range enginetest.Transitions(history(t, d, ref)) {
		assert.Equal(t, 1, n, "transition %q appears once", key)
	}
	assert.Zero(t, c.IOStats().Failed, "no I/O failed")
	assert.Empty(t, c.Unsafe(""), "nothing left unsafe")

	dlq, err := d.js.Stream(d.ctx, topology.DeadLetterStream)
	require.NoError(t, err)
	// The worker refused both; the controller parks them from JetStream's
	// advisories, a moment later.
	parked := func(subject string) *jetstream.RawStreamMsg {
		var m *jetstream.RawStreamMsg
		require.Eventually(t, func() bool {
			var err error
			m, err = dlq.GetLastMsgForSubject(d.ctx, subject)
			return err == nil
		}, 20*time.Second, 10*time.Millisecond, "a dead letter under %s", subject)
		return m
	}
	assert.Contains(t, parked("sb.dlq.cmd.unknown").Header.Get(topology.HeaderDeadReason), "bad command", "the undecodable command")
	assert.Contains(t, parked("sb.dlq.cmd.n2").Header.Get(topology.HeaderDeadReason), `is for node "n2"`, "the misrouted command, under the node it names")
}
