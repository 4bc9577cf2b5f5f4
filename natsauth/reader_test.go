package natsauth_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/natsauth"
	"github.com/switchback-dev/switchback/replay"
	"github.com/switchback-dev/switchback/topology"
)

// TestReaderCannotTouchSwitchbacksConsumers: the reader creates and deletes
// consumers on the event and dead-letter streams (every ordered read does),
// and subject permissions cannot tell an ephemeral consumer from a durable
// one, so Switchback's own durable consumers are denied by name. This runs
// the orchestrator (which creates its consumer and the dead-letterer's) and
// the projector's consumer, then tries to update, pull from and delete
// every durable consumer found on those streams: a durable added or renamed
// without natsauth knowing fails here.
func TestReaderCannotTouchSwitchbacksConsumers(t *testing.T) {
	d := newDeployment(t, natsauth.Config{Nodes: []string{"n1"}})
	d.runOrchestrator(cluster(t, "n1", "n2"))
	_, err := d.js.CreateOrUpdateConsumer(d.ctx, topology.EventStream, jetstream.ConsumerConfig{
		Durable: topology.ProjectorConsumer, AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)
	r := d.connectReader()

	durables := map[string][]jetstream.ConsumerConfig{}
	eventually(t, 30*time.Second, "the orchestrator's and the dead-letterer's consumers exist", func() bool {
		clear(durables)
		for _, s := range []string{topology.EventStream, topology.DeadLetterStream} {
			st, err := d.js.Stream(d.ctx, s)
			require.NoError(t, err)
			infos := st.ListConsumers(d.ctx)
			for ci := range infos.Info() {
				if ci.Config.Durable != "" {
					durables[s] = append(durables[s], ci.Config)
				}
			}
			require.NoError(t, infos.Err())
		}
		return len(durables[topology.EventStream]) == 2 && len(durables[topology.DeadLetterStream]) == 1
	})
	for s, cfgs := range durables {
		for _, c := range cfgs {
			name := c.Durable
			for _, subject := range []string{
				"$JS.API.CONSUMER.CREATE." + s + "." + name,
				"$JS.API.CONSUMER.CREATE." + s + "." + name + ".sb.evt.nothing.>",
				"$JS.API.CONSUMER.DURABLE.CREATE." + s + "." + name,
				"$JS.API.CONSUMER.MSG.NEXT." + s + "." + name,
				"$JS.API.CONSUMER.DELETE." + s + "." + name,
			} {
				err := denied(t, r.viol, subject, func(ctx context.Context) error {
					_, err := r.nc.RequestWithContext(ctx, subject, []byte(`{"batch":1,"expires":200000000}`))
					return err
				})
				t.Logf("reader: %s: %v", subject, err)
			}
			st, err := d.js.Stream(d.ctx, s)
			require.NoError(t, err)
			still, err := st.Consumer(d.ctx, name)
			require.NoError(t, err, "%s's consumer %s is still there", s, name)
			assert.Equal(t, c.FilterSubjects, still.CachedInfo().Config.FilterSubjects, "%s unchanged", name)
			assert.Equal(t, c.FilterSubject, still.CachedInfo().Config.FilterSubject, "%s unchanged", name)
		}
	}
}

// readAsReader is what an operator with the reader's credential does after
// an upgrade: the reads of `switchback replay` and `switchback history
// [--follow]` (replay.Run, eventstore.Store.Scan and Follow, through the
// store bound as the commands bind it), and ordered consumers on the event
// and dead-letter streams; it checks they see what the controller sees and
// that nothing was refused. deadLetters is how many dead letters to expect
// at least.
func readAsReader(t *testing.T, d *deployment, ref events.ManagerRef, deadLetters int) {
	t.Helper()
	r := d.connectReader()
	ctx := d.ctx

	want, err := replay.Run(ctx, d.store, replay.Options{Manager: ref.Name})
	require.NoError(t, err)
	got, err := replay.Run(ctx, r.store, replay.Options{Manager: ref.Name})
	require.NoError(t, err, "the reader replays")
	require.Len(t, got.Upgrades, 1)
	assert.Equal(t, want.Upgrades, got.Upgrades, "the reader's replay is the controller's")

	var scanned []events.Envelope
	require.NoError(t, r.store.Scan(ctx, eventstore.ScanOptions{Subjects: []string{events.ManagerSubjectPrefix(ref) + ".>"}},
		func(e events.Envelope) error { scanned = append(scanned, e); return nil }, nil), "the reader scans a manager's history")
	assert.Equal(t, history(t, d, ref), scanned)

	// --follow: the history so far, then an event appended meanwhile (of
	// another manager, which nothing reacts to).
	later := events.ManagerRef{Namespace: ref.Namespace, Name: "appended-later", UID: "uid-later"}
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	followed := 0
	appended := make(chan error, 1)
	subjects := []string{events.ManagerSubjectPrefix(ref) + ".>", events.ManagerSubjectPrefix(later) + ".>"}
	err = r.store.Follow(fctx, subjects, 0, func(e events.Envelope, _ uint64) bool {
		followed++
		if followed == len(scanned) {
			go func() {
				_, err := d.store.Append(ctx, events.NodeAggregate(later, "n1"), 0, startedOf(later, "n1", "after the replay"))
				appended <- err
			}()
		}
		return e.Aggregate.Manager == later
	}, nil)
	require.NoError(t, err)
	require.NoError(t, <-appended)
	assert.Equal(t, len(scanned)+1, followed, "the reader follows new events")

	if d.auth.APIPrefix(d.auth.Reader) != "" {
		// In its own account: the dead letters by direct get, and no
		// consumer of any kind.
		dl, err := r.js.Stream(ctx, topology.DeadLetterStream)
		require.NoError(t, err)
		for seq := uint64(1); seq <= uint64(deadLetters); seq++ {
			_, err := dl.GetMsg(ctx, seq)
			require.NoError(t, err, "dead letter %d by direct get", seq)
		}
		assert.Empty(t, r.viol.All(), "the reader was refused nothing it reads with")
		subject := topology.NodeAPIPrefix + "CONSUMER.CREATE." + topology.EventStream + ".mine"
		denied(t, r.viol, subject, func(ctx context.Context) error {
			_, err := r.nc.RequestWithContext(ctx, subject, []byte(`{}`))
			return err
		})
		return
	}
	evs := orderedRead(t, r.js, topology.EventStream, len(scanned))
	assert.Len(t, evs, len(scanned))
	dlq := orderedRead(t, r.js, topology.DeadLetterStream, deadLetters)
	assert.GreaterOrEqual(t, len(dlq), deadLetters)
	assert.Empty(t, r.viol.All(), "the reader was refused nothing")
}

// TestReaderWithTheNATSCLI runs the reads docs/nats-authorization.md shows
// operators, with the nats CLI `make setup` builds, as the reader: stream
// info, a message by sequence and the last of a subject, and `sub --stream`
// (an ordered consumer) on the event and the dead-letter streams; with the
// reader alone in its account (--node-accounts), the same reads by direct
// get through --js-api-prefix, and no consumer.
func TestReaderWithTheNATSCLI(t *testing.T) {
	cli, err := filepath.Abs(filepath.Join("..", ".cache", "bin", "nats"))
	require.NoError(t, err)
	if _, err := os.Stat(cli); err != nil {
		t.Skipf("the nats CLI is not built (make setup builds it into .cache/bin): %v", err)
	}
	for _, nodeAccounts := range []bool{false, true} {
		t.Run(fmt.Sprintf("node accounts %t", nodeAccounts), func(t *testing.T) { readWithTheNATSCLI(t, cli, nodeAccounts) })
	}
}

func readWithTheNATSCLI(t *testing.T, cli string, nodeAccounts bool) {
	cfg := natsauth.Config{Nodes: []string{"n1"}}
	if nodeAccounts {
		cfg.Account, cfg.NodeAccounts = natsauth.DefaultAccount, true
	}
	d := newDeployment(t, cfg)
	agg := events.NodeAggregate(testRef, "n1")
	_, err := d.store.Append(d.ctx, agg, 0, started("n1", "cli"))
	require.NoError(t, err)
	_, err = d.js.Publish(d.ctx, "sb.dlq.evt.test", []byte("a parked event"))
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, d.auth.WriteFiles(dir))
	seed := filepath.Join(dir, natsauth.ReaderDir, "reader.nk")
	home := t.TempDir() // no nats context of the machine's user

	// cliRead is one nats CLI call and what its output holds.
	type cliRead struct {
		args []string
		want string
	}
	cases := []cliRead{
		{[]string{"stream", "info", topology.EventStream, "--json"}, `"name": "` + topology.EventStream + `"`},
		{[]string{"stream", "info", topology.DeadLetterStream, "--json"}, `"name": "` + topology.DeadLetterStream + `"`},
		{[]string{"stream", "get", topology.EventStream, "1", "--json"}, agg.Subject()},
		{[]string{"stream", "get", topology.EventStream, "--last-for", agg.Subject(), "--json"}, agg.Subject()},
		{[]string{"stream", "get", topology.DeadLetterStream, "1", "--json"}, "sb.dlq.evt.test"},
	}
	base := []string{"--server", d.srv.ClientURL(), "--nkey", seed, "--inbox-prefix", natsauth.ReaderInboxPrefix, "--timeout", "5s"}
	if nodeAccounts {
		base = append(base, "--js-api-prefix", strings.TrimSuffix(topology.NodeAPIPrefix, "."))
	} else {
		cases = append(cases,
			cliRead{[]string{"sub", "--stream", topology.EventStream, "sb.evt.>", "--all", "--count", "1"}, agg.Subject()},
			cliRead{[]string{"sub", "--stream", topology.DeadLetterStream, "sb.dlq.>", "--all", "--count", "1"}, "a parked event"})
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args[:3], " "), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(d.ctx, 30*time.Second)
			defer cancel()
			args := append(slices.Clone(base), c.args...)
			cmd := exec.CommandContext(ctx, cli, args...)
			cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+home)
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "nats %s\n%s", strings.Join(args, " "), out)
			assert.Contains(t, string(out), c.want)
			assert.NotContains(t, string(out), "ermission")
		})
	}
}
