//go:build linux

package faults

import (
	"fmt"
	"testing"
	"time"

	"github.com/switchback-dev/switchback/events"
)

const scRollingUpdate = "rolling update of Switchback mid-upgrade"

// TestRollingUpdateOfSwitchbackMidUpgrade: Switchback itself is updated
// while an upgrade is in flight (a switch-over held at the data plane), as
// a Deployment and a DaemonSet roll: each controller, then each worker, is
// stopped (SIGTERM) and started again on the next build, one at a time,
// each ready before the next goes. The upgrade then completes with every
// invariant held.
func TestRollingUpdateOfSwitchbackMidUpgrade(t *testing.T) {
	w := newWorld(t, scRollingUpdate, options{gateStep: events.NodeSwitchingOver})
	cs := []*proc{w.startController("c0"), w.startController("c1")}
	workers := w.startWorkers()
	w.eventually("one controller leads", 60*time.Second, func() bool { return cs[0].leading() != cs[1].leading() })
	w.createManager()
	w.waitHeld() // the upgrade is certainly in flight

	w.next.Store(true)
	for i, c := range cs {
		c.stop(t)
		cs[i] = w.startController(fmt.Sprintf("c%d", i))
		w.eventually(cs[i].name+" on the next build is ready", 60*time.Second, cs[i].ready)
	}
	for _, n := range w.nodes {
		workers[n].stop(t)
		workers[n] = w.startWorker(n)
		w.eventually(workers[n].name+" on the next build is ready", 60*time.Second, workers[n].ready)
	}
	w.gate.open()
	w.eventually("a controller of the next build leads", 60*time.Second, func() bool { return cs[0].leading() || cs[1].leading() })
	w.checkInvariants()
}
