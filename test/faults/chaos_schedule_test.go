//go:build linux

package faults

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/switchback-dev/switchback/events"
)

// faultKind is one kind of fault the nemesis injects, as the chaos table
// names it.
type faultKind string

// The nemesis's faults. Each lasts a fault's hold, then heals (a killed
// process is started again, a stopped server restarted, a partition
// healed, the data plane well again).
const (
	fkWorkerKill          faultKind = "kill -9 a worker"
	fkControllerKill      faultKind = "kill -9 the lease holder"
	fkNATSServer          faultKind = "NATS server stopped"
	fkWorkerPartition     faultKind = "worker partitioned from NATS"
	fkControllerNATS      faultKind = "controller partitioned from NATS"
	fkControllerAPIServer faultKind = "controller partitioned from the apiserver"
	fkAPIServer           faultKind = "apiserver outage"
	fkSlowPlane           faultKind = "slow data plane"
	fkFlakyPlane          faultKind = "flaky data plane"
)

// faultKinds in the order the chaos table lists them.
var faultKinds = []faultKind{fkWorkerKill, fkControllerKill, fkNATSServer, fkWorkerPartition, fkControllerNATS,
	fkControllerAPIServer, fkAPIServer, fkSlowPlane, fkFlakyPlane}

// holdRange bounds each kind's hold: long enough for the fault to matter
// (a partition is noticed after two missed one-second pings, a lease lasts
// 4 s), short enough that a run stays within a minute or two.
var holdRange = map[faultKind][2]time.Duration{
	fkWorkerKill:          {0, 2 * time.Second},
	fkControllerKill:      {0, 2 * time.Second},
	fkNATSServer:          {500 * time.Millisecond, 4 * time.Second},
	fkWorkerPartition:     {time.Second, 6 * time.Second},
	fkControllerNATS:      {time.Second, 6 * time.Second},
	fkControllerAPIServer: {time.Second, 8 * time.Second},
	fkAPIServer:           {time.Second, 5 * time.Second},
	fkSlowPlane:           {time.Second, 5 * time.Second},
	fkFlakyPlane:          {time.Second, 5 * time.Second},
}

// fault is one entry of a schedule.
type fault struct {
	kind faultKind
	// target: the node (a worker's faults), the NATS server's index on an
	// R3 cluster; "" when the kind has one, and for a controller's faults,
	// which strike the lease holder of the moment.
	target string
	// at: the fault begins once the history holds this many node state
	// changes (a point of the upgrade's progress, not of time: the same
	// seed lands at the same place however loaded the machine is).
	at int
	// hold: how long the fault lasts.
	hold time.Duration
	// delay: a slow data plane's delay per call.
	delay time.Duration
}

func (f fault) String() string {
	s := fmt.Sprintf("at %2d: %s", f.at, f.kind)
	if f.target != "" {
		s += " (" + f.target + ")"
	}
	if f.delay > 0 {
		s += fmt.Sprintf(", %s a call", f.delay)
	}
	return s + fmt.Sprintf(" for %s", f.hold)
}

// schedule is one run of the nemesis: the world it runs in and its faults
// in the order they begin.
type schedule struct {
	seed  uint64
	plane string // "sim" or "longhorn"
	// cluster: the run's NATS is a 3-server cluster with the streams at R3.
	cluster bool
	// controllers: how many controller replicas race for the lease.
	controllers int
	faults      []fault
}

func (s schedule) String() string {
	var b strings.Builder
	nats := "one NATS server"
	if s.cluster {
		nats = "R3 NATS cluster"
	}
	fmt.Fprintf(&b, "seed %d, %s data plane, %s, %d controller(s):", s.seed, s.plane, nats, s.controllers)
	for _, f := range s.faults {
		b.WriteString("\n  " + f.String())
	}
	return b.String()
}

// replayCommand is the one line that runs s again.
func (s schedule) replayCommand() string {
	return fmt.Sprintf("make chaos CHAOS_PLANE=%s CHAOS_SEED=%d CHAOS_RUNS=1", s.plane, s.seed)
}

// newSchedule draws a schedule from seed for plane's world (nodes: the
// upgraded nodes). It is a pure function of its arguments: a seed names a
// run exactly.
func newSchedule(seed uint64, plane string, nodes []string) schedule {
	h := fnv.New64a()
	h.Write([]byte(plane))
	r := rand.New(rand.NewPCG(seed, h.Sum64()))
	s := schedule{seed: seed, plane: plane, cluster: r.IntN(2) == 0, controllers: 1 + r.IntN(2)}
	// The upgrade holds len(NodeSteps)-1 state changes per node; the last
	// two are left without a fault's beginning, which could otherwise
	// land after the upgrade ended.
	points := len(nodes)*(len(events.NodeSteps)-1) - 2
	n := 1 + r.IntN(4)
	// One schedule in three is a burst: every fault at once.
	burst := -1
	if r.IntN(3) == 0 {
		burst = r.IntN(points)
	}
	seen := map[string]bool{}
	for len(s.faults) < n {
		f := fault{kind: faultKinds[r.IntN(len(faultKinds))], at: r.IntN(points)}
		if burst >= 0 {
			f.at = burst
		}
		switch f.kind {
		case fkWorkerKill, fkWorkerPartition:
			f.target = nodes[r.IntN(len(nodes))]
		case fkNATSServer:
			if s.cluster {
				f.target = fmt.Sprintf("server %d", r.IntN(3))
			}
		case fkSlowPlane:
			f.delay = time.Duration(50+r.IntN(251)) * time.Millisecond
		}
		hr := holdRange[f.kind]
		f.hold = hr[0] + time.Duration(r.Int64N(int64(hr[1]-hr[0])+1)).Round(100*time.Millisecond)
		// One fault per kind and target: a second kill of a dead worker
		// or a second outage of a stopped apiserver is no fault.
		key := string(f.kind)
		if f.kind != fkNATSServer {
			key += "/" + f.target
		}
		if seen[key] {
			continue
		}
		seen[key] = true
		s.faults = append(s.faults, f)
	}
	slices.SortStableFunc(s.faults, func(a, b fault) int { return a.at - b.at })
	return s
}
