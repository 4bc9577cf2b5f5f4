package longhorn_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/longhorn"
	"github.com/switchback-dev/switchback/longhorn/longhornsim"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/test/harness/benchenv"
	"github.com/switchback-dev/switchback/test/harness/enginetest"
)

// BenchmarkReactionLatency measures how long a waiting step takes to react
// to the data-plane change that unblocks it: from the moment the change is
// made to the worker's next action.
//
// n1 upgrades with vol-0's switch-over to n2 held by an injected fault;
// once the node is reported stalled (so the step is waiting), and a random
// moment of up to 250 ms later, the fault is healed, which is the change. The switch-over then completes at once (no
// simulated latency), the step completes, the orchestrator issues the next
// step and the worker's first action there (setting the image of n1's
// instance manager: the in-place profile, whose instance manager Longhorn
// does not replace by itself) ends the sample. So the figure includes the orchestrator's hop
// between two steps, and on the Longhorn adapter the simulated Longhorn
// manager's writing the objects to the apiserver and the watch delivering
// them. On the adapter a sample starts when the simulated Longhorn's last
// write before the action was accepted: the change had then reached the
// apiserver (the time the simulated Longhorn takes to write it is its own,
// not the worker's). The instance-manager action is refused and the upgrade cancelled,
// which brings vol-0 home for the next sample.
//
// Sub-benchmarks: plane=sim (the simulator in process) and plane=longhorn
// (the adapter over the test apiserver, longhornsim playing Longhorn),
// each with wait=signal (the worker's defaults: the change signal, a 30s
// resync) and wait=poll250ms (the signal hidden, the 250 ms poll steps
// used before it). Each reports p50-ms, p99-ms and max-ms over
// REACTION_SAMPLES samples (default 20: p99 is then the largest but one,
// nearest rank). Goal: p99 < 20 ms with the signal.
func BenchmarkReactionLatency(b *testing.B) {
	samples := benchenv.Int(b, "REACTION_SAMPLES", 20)
	for _, pc := range []struct {
		name string
		open opener
	}{
		{"sim", func(_ *testing.B, s *sim.Sim) (dataplane.DataPlane, func(), func(time.Time) time.Time) {
			return s, func() {}, func(healed time.Time) time.Time { return healed }
		}},
		{"longhorn", benchLonghorn},
	} {
		for _, wc := range []struct {
			name   string
			signal bool
		}{{"signal", true}, {"poll250ms", false}} {
			b.Run("plane="+pc.name+"/wait="+wc.name, func(b *testing.B) {
				var lat []time.Duration
				for b.Loop() {
					lat = append(lat, measureReactions(b, pc.open, wc.signal, samples)...)
				}
				slices.Sort(lat)
				b.ReportMetric(msOf(nearestRank(lat, 50)), "p50-ms")
				b.ReportMetric(msOf(nearestRank(lat, 99)), "p99-ms")
				b.ReportMetric(msOf(lat[len(lat)-1]), "max-ms")
			})
		}
	}
}

// opener opens the data plane over s, with a kick that makes a change of
// s reach it at once and changedAt, which says when the change made at
// healed reached the data plane (healed itself for the simulator; the last
// write of the simulated Longhorn before the action for the adapter).
type opener func(b *testing.B, s *sim.Sim) (plane dataplane.DataPlane, kick func(), changedAt func(healed time.Time) time.Time)

// measureReactions runs samples held-and-healed upgrades of n1 on one
// cluster and returns their reaction latencies.
func measureReactions(b *testing.B, open opener, signal bool, samples int) []time.Duration {
	s := sim.New(sim.Config{Profile: dataplane.ProfileInPlace})
	for _, n := range []string{"c1", "n1", "n2"} {
		require.NoError(b, s.AddNode(n))
	}
	require.NoError(b, s.AddVolumeSpec(sim.VolumeSpec{Name: "vol-0", ReplicasOn: []string{"n1", "n2"}, AttachedTo: "c1", EngineOn: "n1"}))
	plane, kick, changedAt := open(b, s)
	rp := &reactionPlane{DataPlane: plane, acted: make(chan time.Time, 1)}
	var dp dataplane.DataPlane = rp
	if w, ok := plane.(dataplane.Watcher); ok && signal {
		dp = signalledPlane{rp, w}
	}
	e := enginetest.Start(b, dp, enginetest.Options{Resync: 30 * time.Second, PollInterval: 250 * time.Millisecond,
		StallAfter: 30 * time.Millisecond, FailAfter: time.Hour})
	var out []time.Duration
	for i := range samples {
		require.NoError(b, s.InjectTargetMoveFailure("vol-0"))
		kick()
		m := ref(fmt.Sprintf("reaction-%d", i))
		e.Request(m, "n1")
		e.WaitNode(m, "n1", time.Minute, "stalled at switching-over", func(n nodeupgrade.State) bool {
			return n.Stalled && n.State == events.NodeSwitchingOver
		})
		// The change comes at a random moment of the wait, as a real one
		// would (right after the stall it would land at the start of a
		// poll's wait, its worst case).
		time.Sleep(rand.N(250 * time.Millisecond))
		changed := rp.arm()
		require.NoError(b, s.HealTargetMoveFailure("vol-0"))
		kick()
		select {
		case at := <-rp.acted:
			out = append(out, at.Sub(changedAt(changed)))
		case <-time.After(time.Minute):
			b.Fatal("no action after the change")
		}
		e.Cancel(m)
		st := e.WaitManager(m, time.Minute, "a terminal state", manager.State.Terminal)
		require.Equal(b, events.ManagerCancelled, st.State, st.Message)
	}
	return out
}

// errHeld refuses the instance-manager actions for the benchmark (a
// transient error: the worker waits and would retry), so n1 keeps its
// instance manager for the next sample.
var errHeld = errors.New("held by the benchmark")

// reactionPlane timestamps the first instance-manager action after arm.
type reactionPlane struct {
	dataplane.DataPlane
	mu    sync.Mutex
	armed bool
	acted chan time.Time
}

// arm starts a sample and returns its start.
func (p *reactionPlane) arm() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = true
	return time.Now()
}

func (p *reactionPlane) note() {
	at := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.armed {
		p.armed = false
		p.acted <- at
	}
}

func (p *reactionPlane) DeleteInstanceManager(context.Context, string) error {
	p.note()
	return errHeld
}

func (p *reactionPlane) SetInstanceManagerImage(context.Context, string, string) error {
	p.note()
	return errHeld
}

// signalledPlane passes the wrapped plane's change signal on.
type signalledPlane struct {
	*reactionPlane
	w dataplane.Watcher
}

func (p signalledPlane) Changed() <-chan struct{} { return p.w.Changed() }

// benchLonghorn serves s as Longhorn objects in a fresh namespace of the
// test apiserver and returns the adapter over them, and a kick that makes
// the simulated Longhorn write a change of s at once.
func benchLonghorn(b *testing.B, s *sim.Sim) (dataplane.DataPlane, func(), func(time.Time) time.Time) {
	ctx, _, dyn, ns := longhornNamespace(b)
	writes := &timedWrites{Interface: dyn}
	mgr, err := longhornsim.Start(ctx, writes, s, longhornsim.Options{Namespace: ns, Log: testLog()})
	require.NoError(b, err)
	b.Cleanup(mgr.Close)
	plane, err := longhorn.New(ctx, dyn, longhorn.Options{Namespace: ns, Log: testLog(), SyncTimeout: 30 * time.Second,
		Platform: dataplane.Platform{Profile: dataplane.ProfileInPlace}})
	require.NoError(b, err)
	// The adapter shows the cluster before the first sample.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if vols, err := plane.Volumes(ctx); err == nil && len(vols) == 1 {
			break
		}
		require.True(b, time.Now().Before(deadline), "the adapter never showed the simulated cluster")
		time.Sleep(10 * time.Millisecond)
	}
	return plane, mgr.Kick, func(time.Time) time.Time { return writes.lastWrite() }
}

func nearestRank(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p+99)/100 - 1
	return sorted[max(i, 0)]
}

func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
