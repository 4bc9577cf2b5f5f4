package dataplane

import (
	"context"
	"fmt"
	"strings"
)

// Action is one data-plane change as a value: which call of Actions, on
// what, with what. The node steps plan them, one applier makes them
// (Apply), and whatever passes every call through (the simulator's NATS
// service, recorders, fault gates) takes the value through ActionsFunc
// instead of restating each method. A new call is a method of Actions, a
// Call below with its case in Apply and its method of ActionsFunc, and its
// implementations.
type Action struct {
	Call Call `json:"call"`
	// Object is the node, volume, instance manager or pod (namespace/name)
	// acted on.
	Object string `json:"object"`
	// Arg is the replica, snapshot, node, image or pod uid, as the call
	// takes it.
	Arg string `json:"arg,omitempty"`
	// Allow is SetReplicaScheduling's.
	Allow bool `json:"allow,omitempty"`
}

// Call names an Actions method.
type Call string

// The calls of Actions.
const (
	CallSetReplicaScheduling    Call = "SetReplicaScheduling"
	CallCreateSnapshot          Call = "CreateSnapshot"
	CallDeleteSnapshot          Call = "DeleteSnapshot"
	CallFailReplica             Call = "FailReplica"
	CallStopReplica             Call = "StopReplica"
	CallSetEngineNode           Call = "SetEngineNode"
	CallDeleteInstanceManager   Call = "DeleteInstanceManager"
	CallSetInstanceManagerImage Call = "SetInstanceManagerImage"
	CallTaintNode               Call = "TaintNode"
	CallUntaintNode             Call = "UntaintNode"
	CallEvictPod                Call = "EvictPod"
	CallRestartShareManager     Call = "RestartShareManager"
)

// Apply makes a's call on dp. An unknown call is refused (ErrRefused): a
// newer peer's call that this build does not know.
func (a Action) Apply(ctx context.Context, dp Actions) error {
	switch a.Call {
	case CallSetReplicaScheduling:
		return dp.SetReplicaScheduling(ctx, a.Object, a.Allow)
	case CallCreateSnapshot:
		return dp.CreateSnapshot(ctx, a.Object, a.Arg)
	case CallDeleteSnapshot:
		return dp.DeleteSnapshot(ctx, a.Object, a.Arg)
	case CallFailReplica:
		return dp.FailReplica(ctx, a.Object, a.Arg)
	case CallStopReplica:
		return dp.StopReplica(ctx, a.Object, a.Arg)
	case CallSetEngineNode:
		return dp.SetEngineNode(ctx, a.Object, a.Arg)
	case CallDeleteInstanceManager:
		return dp.DeleteInstanceManager(ctx, a.Object)
	case CallSetInstanceManagerImage:
		return dp.SetInstanceManagerImage(ctx, a.Object, a.Arg)
	case CallTaintNode:
		return dp.TaintNode(ctx, a.Object)
	case CallUntaintNode:
		return dp.UntaintNode(ctx, a.Object)
	case CallEvictPod:
		return dp.EvictPod(ctx, a.Object, a.Arg)
	case CallRestartShareManager:
		return dp.RestartShareManager(ctx, a.Object, a.Arg)
	}
	return fmt.Errorf("%w: unknown data-plane call %q", ErrRefused, a.Call)
}

// String is the call as logs, plans and the golden action logs write it:
// `SetReplicaScheduling n1 allow=false`, `SetEngineNode vol-0 "n2"` (an
// empty node, which follows the attached one, shows as ""), `FailReplica
// vol-0 r1`.
func (a Action) String() string {
	switch a.Call {
	case CallSetReplicaScheduling:
		return fmt.Sprintf("%s %s allow=%t", a.Call, a.Object, a.Allow)
	case CallSetEngineNode:
		return fmt.Sprintf("%s %s %q", a.Call, a.Object, a.Arg)
	}
	return strings.TrimSpace(fmt.Sprintf("%s %s %s", a.Call, a.Object, a.Arg))
}

// ActionsFunc is an Actions that hands every call to the function as its
// Action.
type ActionsFunc func(context.Context, Action) error

var _ Actions = ActionsFunc(nil)

// SetReplicaScheduling implements Actions.
func (f ActionsFunc) SetReplicaScheduling(ctx context.Context, node string, allow bool) error {
	return f(ctx, Action{Call: CallSetReplicaScheduling, Object: node, Allow: allow})
}

// CreateSnapshot implements Actions.
func (f ActionsFunc) CreateSnapshot(ctx context.Context, volume, name string) error {
	return f(ctx, Action{Call: CallCreateSnapshot, Object: volume, Arg: name})
}

// DeleteSnapshot implements Actions.
func (f ActionsFunc) DeleteSnapshot(ctx context.Context, volume, name string) error {
	return f(ctx, Action{Call: CallDeleteSnapshot, Object: volume, Arg: name})
}

// FailReplica implements Actions.
func (f ActionsFunc) FailReplica(ctx context.Context, volume, replica string) error {
	return f(ctx, Action{Call: CallFailReplica, Object: volume, Arg: replica})
}

// StopReplica implements Actions.
func (f ActionsFunc) StopReplica(ctx context.Context, volume, replica string) error {
	return f(ctx, Action{Call: CallStopReplica, Object: volume, Arg: replica})
}

// SetEngineNode implements Actions.
func (f ActionsFunc) SetEngineNode(ctx context.Context, volume, node string) error {
	return f(ctx, Action{Call: CallSetEngineNode, Object: volume, Arg: node})
}

// DeleteInstanceManager implements Actions.
func (f ActionsFunc) DeleteInstanceManager(ctx context.Context, name string) error {
	return f(ctx, Action{Call: CallDeleteInstanceManager, Object: name})
}

// SetInstanceManagerImage implements Actions.
func (f ActionsFunc) SetInstanceManagerImage(ctx context.Context, name, image string) error {
	return f(ctx, Action{Call: CallSetInstanceManagerImage, Object: name, Arg: image})
}

// TaintNode implements Actions.
func (f ActionsFunc) TaintNode(ctx context.Context, node string) error {
	return f(ctx, Action{Call: CallTaintNode, Object: node})
}

// UntaintNode implements Actions.
func (f ActionsFunc) UntaintNode(ctx context.Context, node string) error {
	return f(ctx, Action{Call: CallUntaintNode, Object: node})
}

// EvictPod implements Actions.
func (f ActionsFunc) EvictPod(ctx context.Context, pod, uid string) error {
	return f(ctx, Action{Call: CallEvictPod, Object: pod, Arg: uid})
}

// RestartShareManager implements Actions.
func (f ActionsFunc) RestartShareManager(ctx context.Context, pod, uid string) error {
	return f(ctx, Action{Call: CallRestartShareManager, Object: pod, Arg: uid})
}

// WithActions is dp with its actions handed to f instead (a recorder or a
// gate in front of dp's own, which f reaches through Action.Apply).
func WithActions(dp DataPlane, f ActionsFunc) DataPlane {
	return withActions{Reader: dp, TargetRecorder: dp, NodeMarker: dp, SnapshotHasher: dp, ReplicaCounter: dp, ActionsFunc: f}
}

type withActions struct {
	Reader
	TargetRecorder
	NodeMarker
	SnapshotHasher
	ReplicaCounter
	ActionsFunc
}
