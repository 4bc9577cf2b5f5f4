//go:build linux

package faults

import (
	"context"
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
}

func newGate(w *world, plane dataplane.DataPlane, step events.NodeState) *gate {
	g := &gate{DataPlane: plane, w: w, step: step, held: make(chan heldCall, 1), release: make(chan struct{})}
	g.armed.Store(true)
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
	if !g.holding.Load() {
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

// Reader and Actions, each call passing the gate first.

func (g *gate) Platform(ctx context.Context) (dataplane.Platform, error) {
	g.wait("Platform")
	return g.DataPlane.Platform(ctx)
}

func (g *gate) Nodes(ctx context.Context) ([]dataplane.Node, error) {
	g.wait("Nodes")
	return g.DataPlane.Nodes(ctx)
}

func (g *gate) Node(ctx context.Context, name string) (dataplane.Node, error) {
	g.wait("Node")
	return g.DataPlane.Node(ctx, name)
}

func (g *gate) DefaultInstanceManagerImage(ctx context.Context) (string, error) {
	g.wait("DefaultInstanceManagerImage")
	return g.DataPlane.DefaultInstanceManagerImage(ctx)
}

func (g *gate) InstanceManagers(ctx context.Context, node string) ([]dataplane.InstanceManager, error) {
	g.wait("InstanceManagers")
	return g.DataPlane.InstanceManagers(ctx, node)
}

func (g *gate) Volumes(ctx context.Context) ([]dataplane.Volume, error) {
	g.wait("Volumes")
	return g.DataPlane.Volumes(ctx)
}

func (g *gate) Volume(ctx context.Context, name string) (dataplane.Volume, error) {
	g.wait("Volume")
	return g.DataPlane.Volume(ctx, name)
}

func (g *gate) VolumesOn(ctx context.Context, node string) ([]dataplane.Volume, error) {
	g.wait("VolumesOn")
	return g.DataPlane.VolumesOn(ctx, node)
}

func (g *gate) TargetCounts(ctx context.Context) (map[string]int, error) {
	g.wait("TargetCounts")
	return g.DataPlane.TargetCounts(ctx)
}

func (g *gate) SetReplicaScheduling(ctx context.Context, node string, allow bool) error {
	g.wait("SetReplicaScheduling")
	return g.DataPlane.SetReplicaScheduling(ctx, node, allow)
}

func (g *gate) CreateSnapshot(ctx context.Context, volume, name string) error {
	g.wait("CreateSnapshot")
	return g.DataPlane.CreateSnapshot(ctx, volume, name)
}

func (g *gate) DeleteSnapshot(ctx context.Context, volume, name string) error {
	g.wait("DeleteSnapshot")
	return g.DataPlane.DeleteSnapshot(ctx, volume, name)
}

func (g *gate) FailReplica(ctx context.Context, volume, replica string) error {
	g.wait("FailReplica")
	return g.DataPlane.FailReplica(ctx, volume, replica)
}

func (g *gate) SetEngineNode(ctx context.Context, volume, node string) error {
	g.wait("SetEngineNode")
	return g.DataPlane.SetEngineNode(ctx, volume, node)
}

func (g *gate) DeleteInstanceManager(ctx context.Context, name string) error {
	g.wait("DeleteInstanceManager")
	return g.DataPlane.DeleteInstanceManager(ctx, name)
}

func (g *gate) SetInstanceManagerImage(ctx context.Context, name, image string) error {
	g.wait("SetInstanceManagerImage")
	return g.DataPlane.SetInstanceManagerImage(ctx, name, image)
}
