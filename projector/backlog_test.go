package projector_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/kubeclient"
	"github.com/switchback-dev/switchback/projector"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/test/harness/enginetest"
)

// A projector that starts on a long history (a new installation, a consumer
// reset) mostly meets managers deleted long ago. It finds out from one LIST
// per namespace, not one read per manager, and still projects the managers
// that exist exactly as Replay computes them.
func TestBacklogOfDeletedManagersIsListedNotRead(t *testing.T) {
	h := newHarness(t, threeNodes(t, sim.Config{Profile: dataplane.ProfileInPlace}), enginetest.Options{StallAfter: 10 * time.Second})
	kept := h.createManager("kept")
	h.e.Request(kept)
	h.e.WaitManager(kept, 30*time.Second, "a terminal state", func(s managerState) bool { return s.Terminal() })

	// The same history for managers whose objects are gone.
	const deleted = 60
	hist := h.history(kept)
	js, err := jetstream.New(h.e.NC)
	require.NoError(t, err)
	for i := range deleted {
		ref := events.ManagerRef{Namespace: h.ns, Name: fmt.Sprintf("gone-%d", i), UID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i)}
		for _, e := range hist {
			agg := events.ManagerAggregate(ref)
			if e.Aggregate.IsNode() {
				agg = events.NodeAggregate(ref, e.Aggregate.Node)
			}
			if d, ok := e.Data.(events.UpgradeRequested); ok {
				d.Namespace, d.Name, d.UID = ref.Namespace, ref.Name, ref.UID
				e.Data = d
			}
			e.Aggregate, e.ID = agg, events.DeriveID(agg, e.CausationID, int(e.Sequence))
			msg, err := events.Encode(e)
			require.NoError(t, err)
			_, err = js.PublishMsgAsync(msg)
			require.NoError(t, err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		t.Fatal("publishing the deleted managers' histories timed out")
	}

	var gets, lists atomic.Int64
	cfg := rest.CopyConfig(h.env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/namespaces/"+h.ns+"/dataengineupgrademanagers") {
				if strings.HasSuffix(req.URL.Path, "/dataengineupgrademanagers") {
					lists.Add(1)
				} else {
					gets.Add(1)
				}
			}
			return rt.RoundTrip(req)
		})
	})
	kc, err := kubeclient.New(cfg)
	require.NoError(t, err)
	r := h.startProjector(func(c *projector.Config) { c.Client = kc })
	h.waitCaughtUp(kept, 30*time.Second)
	last, err := h.e.Store.LastSequence(h.ctx)
	require.NoError(t, err)
	eventually(t, 30*time.Second, "every message handled", func() (projector.Metrics, error) { return r.p.Metrics(), nil },
		func(m projector.Metrics) bool { return m.LastSequence == last })

	h.assertMatchesReplay(kept)
	m := r.p.Metrics()
	// At least: a batch redelivered on a loaded machine is counted again.
	assert.GreaterOrEqual(t, m.Ignored, uint64(deleted*len(hist)), "every event of a deleted manager is acked, not projected")
	assert.Equal(t, int64(1), lists.Load(), "one LIST for the namespace")
	assert.Zero(t, gets.Load(), "no manager read on its own")
	assert.Zero(t, m.Rejected)
	assert.Zero(t, m.WriteFailures)
}
