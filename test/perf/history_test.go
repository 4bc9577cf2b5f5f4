package perf_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/events/fastcodec"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/test/harness/enginetest"
)

var (
	templateOnce sync.Once
	template     []events.Envelope
)

// completedUpgrade returns the history of one real upgrade, run to
// completion by the engine (orchestrator and workers) on the standard
// 3-node simulated cluster; computed once per process.
func completedUpgrade(b *testing.B) []events.Envelope {
	b.Helper()
	templateOnce.Do(func() {
		cluster, err := sim.ThreeNodes(sim.Config{Profile: dataplane.ProfileInPlace})
		if err != nil {
			b.Fatal(err)
		}
		e := enginetest.Start(b, cluster, enginetest.Options{StallAfter: 10 * time.Second})
		defer e.Stop()
		ref := events.ManagerRef{Namespace: "longhorn-system", Name: "template", UID: "00000000-0000-4000-8000-000000000000"}
		e.Request(ref)
		st := e.WaitManager(ref, time.Minute, "completed", func(s managerStateT) bool { return s.Terminal() })
		if st.State != events.ManagerCompleted {
			b.Fatalf("the template upgrade ended %s: %s", st.State, st.Message)
		}
		template = e.History(ref)
	})
	if template == nil {
		b.Fatal("no template history (its generation failed earlier)")
	}
	return template
}

// readdress returns hist as the history of the manager ref: the same
// events, on ref's subjects, with ids derived anew (so JetStream does not
// take them for duplicates) and causation ids naming ref's UID.
func readdress(hist []events.Envelope, ref events.ManagerRef) []events.Envelope {
	out := make([]events.Envelope, len(hist))
	for i, e := range hist {
		old := e.Aggregate.Manager.UID
		agg := events.ManagerAggregate(ref)
		if e.Aggregate.IsNode() {
			agg = events.NodeAggregate(ref, e.Aggregate.Node)
		}
		e.Aggregate = agg
		if d, ok := e.Data.(events.UpgradeRequested); ok {
			// The request names its manager; the aggregate checks it.
			d.Namespace, d.Name, d.UID = ref.Namespace, ref.Name, ref.UID
			e.Data = d
		}
		e.CausationID = strings.ReplaceAll(e.CausationID, old, ref.UID)
		e.ID = events.DeriveID(agg, e.CausationID, i)
		e.Sequence = 0
		out[i] = e
	}
	return out
}

// uid is a stable UUID-shaped UID for the i-th generated manager.
func uid(i int) string {
	h := sha256.Sum256(fmt.Appendf(nil, "perf-manager-%d", i))
	s := hex.EncodeToString(h[:16])
	return s[0:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:32]
}

// loadFinished appends the complete histories of n finished managers of
// namespace ns, the template re-addressed, with asynchronous publishes (the
// histories are complete and in order, so the per-subject concurrency check
// of Append has nothing to protect here). It returns the event count.
func loadFinished(ctx context.Context, b *testing.B, js jetstream.JetStream, hist []events.Envelope, ns string, n int) int {
	b.Helper()
	count := 0
	for i := range n {
		ref := events.ManagerRef{Namespace: ns, Name: fmt.Sprintf("done-%05d", i), UID: uid(i)}
		for _, e := range readdress(hist, ref) {
			msg, err := fastcodec.Encode(e)
			if err != nil {
				b.Fatalf("encode %s of %s: %v", e.Type(), ref, err)
			}
			for {
				_, err = js.PublishMsgAsync(msg)
				if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
					break
				}
				// The window is full: let it drain.
				select {
				case <-js.PublishAsyncComplete():
				case <-ctx.Done():
				}
			}
			if err != nil {
				b.Fatalf("publish %s of %s: %v", e.Type(), ref, err)
			}
			count++
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		b.Fatalf("%d histories not acknowledged: %v", n, ctx.Err())
	}
	return count
}
