//go:build linux

package faults

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
)

// gate is the data plane as the processes see it (served with simremote),
// able to hold every call once a node has entered a given step. Most steps
// are a handful of quick calls, so a kill aimed at a step from outside
// would land in a later one; held at its first data-plane call, the worker
// is certainly inside the step when it dies.
//
// A worker appends the event entering a step before it makes the step's
// first call, so reading the stream at the time of each call (a consistent
// read of what is stored) tells whether the step has been entered.
type gate struct {
	dataplane.DataPlane
	w    *world
	step events.NodeState
	// call, when set, is the only call that starts the holding.
	call dataplane.Call

	armed    atomic.Bool
	holding  atomic.Bool // once a node entered the step, every call waits
	once     sync.Once
	held     chan heldCall // the first held call
	release  chan struct{}
	released sync.Once
}

// heldCall says which node's step was entered and which call was held.
type heldCall struct {
	node, method string
	// seen: no call is held; the stream showed the node in the step (a
	// step that makes no request on the Longhorn path).
	seen bool
}

// newGate wraps plane; with no step it never holds (the nemesis still
// slows and fails calls through it, see planeFaults).
func newGate(w *world, plane dataplane.DataPlane, step events.NodeState) *gate {
	g := &gate{DataPlane: plane, w: w, step: step, held: make(chan heldCall, 1), release: make(chan struct{})}
	g.armed.Store(step != "")
	return g
}

// open lets every held and future call through.
func (g *gate) open() {
	g.armed.Store(false)
	g.released.Do(func() { close(g.release) })
}

// wait holds the call until the gate opens, when a node is in the step.
func (g *gate) wait(method string) {
	if !g.armed.Load() {
		return
	}
	g.w.mu.Lock()
	created := g.w.ref.UID != ""
	g.w.mu.Unlock()
	if !created {
		return
	}
	if !g.holding.Load() && (g.call == "" || dataplane.Call(method) == g.call) {
		h, _ := g.w.refresh()
		for _, n := range g.w.nodes {
			if stateOf(h, n) == g.step {
				g.once.Do(func() {
					g.holding.Store(true)
					g.held <- heldCall{node: n, method: method}
				})
			}
		}
	}
	if g.holding.Load() {
		<-g.release
	}
}

// Reader: each call passes the gate, then the run's data-plane faults
// (world.plane); the actions do the same through plane.

func (g *gate) Platform(ctx context.Context) (dataplane.Platform, error) {
	return read(g, "Platform", func() (dataplane.Platform, error) { return g.DataPlane.Platform(ctx) })
}

func (g *gate) Nodes(ctx context.Context) ([]dataplane.Node, error) {
	return read(g, "Nodes", func() ([]dataplane.Node, error) { return g.DataPlane.Nodes(ctx) })
}

func (g *gate) Node(ctx context.Context, name string) (dataplane.Node, error) {
	return read(g, "Node", func() (dataplane.Node, error) { return g.DataPlane.Node(ctx, name) })
}

func (g *gate) DefaultInstanceManagerImage(ctx context.Context) (string, error) {
	return read(g, "DefaultInstanceManagerImage", func() (string, error) { return g.DataPlane.DefaultInstanceManagerImage(ctx) })
}

func (g *gate) InstanceManagers(ctx context.Context, node string) ([]dataplane.InstanceManager, error) {
	return read(g, "InstanceManagers", func() ([]dataplane.InstanceManager, error) { return g.DataPlane.InstanceManagers(ctx, node) })
}

func (g *gate) Volumes(ctx context.Context) ([]dataplane.Volume, error) {
	return read(g, "Volumes", func() ([]dataplane.Volume, error) { return g.DataPlane.Volumes(ctx) })
}

func (g *gate) Volume(ctx context.Context, name string) (dataplane.Volume, error) {
	return read(g, "Volume", func() (dataplane.Volume, error) { return g.DataPlane.Volume(ctx, name) })
}

func (g *gate) VolumesOn(ctx context.Context, node string) ([]dataplane.Volume, error) {
	return read(g, "VolumesOn", func() ([]dataplane.Volume, error) { return g.DataPlane.VolumesOn(ctx, node) })
}

func (g *gate) TargetCounts(ctx context.Context) (map[string]int, error) {
	return read(g, "TargetCounts", func() (map[string]int, error) { return g.DataPlane.TargetCounts(ctx) })
}

// plane is what the processes are served: the gated reads, and every
// action (StopReplica too) through act.
func (g *gate) plane() dataplane.DataPlane {
	return dataplane.WithActions(g, func(ctx context.Context, a dataplane.Action) error {
		return act(g, string(a.Call), func() error { return a.Apply(ctx, g.DataPlane) })
	})
}

// read passes a call that only reads: held by the gate, then delayed or
// refused by the run's data-plane faults.
func read[T any](g *gate, method string, call func() (T, error)) (T, error) {
	g.wait(method)
	if err := g.w.plane.before(); err != nil {
		var zero T
		return zero, fmt.Errorf("%s: %w", method, err)
	}
	return call()
}

// act passes a call that changes the cluster: as read, and a flaky data
// plane may also lose the answer of a call that took effect.
func act(g *gate, method string, call func() error) error {
	g.wait(method)
	if err := g.w.plane.before(); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	if err := call(); err != nil {
		return err
	}
	if err := g.w.plane.after(); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	return nil
}
