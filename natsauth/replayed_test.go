package natsauth_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/natsauth"
	"github.com/switchback-dev/switchback/topology"
)

// TestReaderReplayStoresNothing plays the reader's replay: NATS checks no
// permission on a pull's reply subject, so the reader can have JetStream
// deliver any stored event verbatim onto the event's own subject, which the
// event stream captures. Every event is stored with the expectation its
// append made (the subject's last sequence; the first message of an atomic
// batch carries it for the batch, the others their batch headers), and a
// stored expectation never holds again, so no copy is stored once the
// deduplication window has passed too. A message stored without an
// expectation is the positive control: its copy lands, so the replays did
// reach the stream.
func TestReaderReplayStoresNothing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(testing.TB, *natsauth.Authorization) *deployment
	}{
		{"single server (publish chains)", startDeployment},
		{"R3 cluster (atomic batches)", startClusterDeployment},
	} {
		t.Run(tc.name, func(t *testing.T) {
			auth, err := natsauth.Generate(natsauth.Config{Nodes: []string{"n1"}, Account: natsauth.DefaultAccount})
			require.NoError(t, err)
			d := tc.start(t, auth)
			ctx := d.ctx
			node := events.NodeAggregate(testRef, "n1")
			mgr := events.ManagerAggregate(testRef)
			_, err = d.store.Append(ctx, mgr, 0, events.New(mgr, events.SourceController, "c1", time.Now(), events.CancelRequested{})...)
			require.NoError(t, err)
			v, err := d.store.Append(ctx, node, 0, started("n1", "c2"))
			require.NoError(t, err)
			_, err = d.store.Append(ctx, node, v, events.New(node, events.SourceWorker+"/n1", "c3", time.Now(),
				events.NodeStateChanged{From: events.NodeInitializing, To: events.NodeFailingReplicas},
				events.VolumeStateChanged{Volume: "vol-1", To: events.VolumePending},
				events.VolumeStateChanged{Volume: "vol-2", To: events.VolumePending})...)
			require.NoError(t, err)

			// The clock's id leaves the deduplication window after every
			// event's did: once it is accepted again, no event's id is held.
			s, err := d.js.Stream(ctx, topology.EventStream)
			require.NoError(t, err)
			cfg := s.CachedInfo().Config
			cfg.Duplicates = 100 * time.Millisecond
			_, err = d.js.UpdateStream(ctx, cfg)
			require.NoError(t, err)
			// control has neither an expectation nor an id: its copy lands.
			control := events.NodeAggregate(events.ManagerRef{Namespace: "ns", Name: "control", UID: "c"}, "n1").Subject()
			_, err = d.js.Publish(ctx, control, []byte("control"))
			require.NoError(t, err)
			// On a subject of its own: a pull on the control's subject can
			// deliver nothing but the control.
			clock := nats.NewMsg(events.NodeAggregate(events.ManagerRef{Namespace: "ns", Name: "clock", UID: "k"}, "n1").Subject())
			clock.Data = []byte("clock")
			clock.Header.Set(jetstream.MsgIDHeader, "clock")
			_, err = d.js.PublishMsg(ctx, clock)
			require.NoError(t, err)
			eventually(t, 20*time.Second, "the deduplication window has passed", func() bool {
				ack, err := d.js.PublishMsg(ctx, clock)
				return err == nil && !ack.Duplicate
			})
			info, err := s.Info(ctx)
			require.NoError(t, err)
			before := info.State
			stored := map[uint64]*jetstream.RawStreamMsg{}
			for seq := before.FirstSeq; seq <= before.LastSeq; seq++ {
				m, err := s.GetMsg(ctx, seq)
				require.NoError(t, err)
				stored[seq] = m
			}

			r := d.connectReader()
			replayOnto := func(m *jetstream.RawStreamMsg) {
				t.Helper()
				c, err := r.js.CreateConsumer(ctx, topology.EventStream, jetstream.ConsumerConfig{
					FilterSubject: m.Subject, DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: m.Sequence,
					AckPolicy: jetstream.AckNonePolicy, InactiveThreshold: time.Minute,
				})
				require.NoError(t, err, "the reader creates an ephemeral consumer")
				name := c.CachedInfo().Name
				// A pull is fire-and-forget: on a cluster it is lost while the
				// consumer's interest has not reached the reader's server yet,
				// so it is sent again until a delivery shows. A second pull
				// delivers the subject's next message: replayed too, which
				// is what the test wants refused anyway.
				eventually(t, 20*time.Second, "the consumer delivered", func() bool {
					// The reader may not read consumer info; the controller may.
					c, err := d.js.Consumer(ctx, topology.EventStream, name)
					if err == nil && c.CachedInfo().Delivered.Stream >= m.Sequence {
						return true
					}
					require.NoError(t, r.nc.PublishRequest(fmt.Sprintf("$JS.API.CONSUMER.MSG.NEXT.%s.%s", topology.EventStream, name), m.Subject, []byte(`{"batch":1}`)))
					return false
				})
			}
			var controlMsg *jetstream.RawStreamMsg
			for seq := before.FirstSeq; seq <= before.LastSeq; seq++ {
				switch m := stored[seq]; {
				case m.Subject == control:
					controlMsg = m
				case string(m.Data) != "clock":
					replayOnto(m)
				}
			}
			require.NotNil(t, controlMsg)
			replayOnto(controlMsg)
			eventually(t, 20*time.Second, "the control's copy lands", func() bool {
				info, err := s.Info(ctx)
				return err == nil && info.State.LastSeq > before.LastSeq
			})
			after, err := s.Info(ctx)
			require.NoError(t, err)
			assert.Equal(t, before.LastSeq+1, after.State.LastSeq, "only the control was stored again")
			last, err := s.GetMsg(ctx, after.State.LastSeq)
			require.NoError(t, err)
			assert.Equal(t, "control", string(last.Data))
			h := history(t, d, testRef)
			assert.Len(t, h, 5, "the manager's history is as appended")
			assert.Empty(t, r.viol.All(), "the reader was refused nothing it did")
		})
	}
}
