// Package simremote serves a simulated cluster over NATS request/reply and
// offers a dataplane.DataPlane client for it, so that worker processes (the
// `switchback worker` command, the process-level fault tests) share one
// simulated cluster with the process that owns it.
package simremote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchback-dev/switchback/dataplane"
)

// request is the body of every call.
type request struct {
	Node   string `json:"node,omitempty"`
	Volume string `json:"volume,omitempty"`
	// Away is the record of RecordTargetAway; nil removes it.
	Away *dataplane.TargetAway `json:"away,omitempty"`
	// Mark is the mark of MarkUpgradePending.
	Mark string `json:"mark,omitempty"`
	// At is the time of RequestSnapshotHashing.
	At time.Time `json:"at,omitzero"`
	// Action is the change of an "act" call.
	Action *dataplane.Action `json:"action,omitempty"`
	// Replicas is SetReplicaCount's; Replica DeleteReplica's.
	Replicas *dataplane.ReplicaSpec `json:"replicas,omitempty"`
	Replica  string                 `json:"replica,omitempty"`
}

// reply carries a result or an error kind that maps back to the
// dataplane sentinels.
type reply struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
	Kind   string          `json:"kind,omitempty"` // notfound, refused, switchingpaths, inengine, budget
}

// Server answers calls for one data plane.
type Server struct {
	subs []*nats.Subscription
	// stop ends the change notices; done is closed once they ended.
	stop, done chan struct{}
}

// Serve answers calls on prefix.<method> with dp until Stop. When dp
// signals its changes (dataplane.Watcher, as the simulator does), Serve
// also announces them on topology.SimChangedSubject(prefix), which the
// Client's Changed turns back into the signal.
func Serve(nc *nats.Conn, prefix string, dp dataplane.DataPlane) (*Server, error) {
	s := &Server{stop: make(chan struct{}), done: make(chan struct{})}
	for method, h := range handlers(dp) {
		sub, err := nc.QueueSubscribe(prefix+"."+method, "sim", func(m *nats.Msg) {
			var req request
			var rep reply
			if err := json.Unmarshal(m.Data, &req); err != nil {
				rep.Error = "bad request: " + err.Error()
			} else if res, err := h(context.Background(), req); err != nil {
				rep.Error = err.Error()
				switch {
				case errors.Is(err, dataplane.ErrNotFound):
					rep.Kind = "notfound"
				case errors.Is(err, dataplane.ErrRefused):
					rep.Kind = "refused"
				case errors.Is(err, dataplane.ErrSwitchingPaths):
					rep.Kind = "switchingpaths"
				case errors.Is(err, dataplane.ErrReplicaInEngine):
					rep.Kind = "inengine"
				case errors.Is(err, dataplane.ErrDisruptionBudget):
					rep.Kind = "budget"
				}
			} else if res != nil {
				rep.Result, _ = json.Marshal(res)
			}
			b, _ := json.Marshal(rep)
			_ = m.Respond(b)
		})
		if err != nil {
			close(s.done) // no announcing yet
			s.Stop()
			return nil, fmt.Errorf("simremote: serve %s: %w", method, err)
		}
		s.subs = append(s.subs, sub)
	}
	w, ok := dp.(dataplane.Watcher)
	if !ok {
		close(s.done)
		return s, nil
	}
	go func() {
		defer close(s.done)
		announce(nc, prefix, w, s.stop)
	}()
	return s, nil
}

// Stop stops answering and announcing; it may be called more than once.
func (s *Server) Stop() {
	for _, sub := range s.subs {
		_ = sub.Unsubscribe()
	}
	s.subs = nil
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
}

type handler func(context.Context, request) (any, error)

func handlers(dp dataplane.DataPlane) map[string]handler {
	return map[string]handler{
		"platform":  func(ctx context.Context, _ request) (any, error) { return dp.Platform(ctx) },
		"nodes":     func(ctx context.Context, _ request) (any, error) { return dp.Nodes(ctx) },
		"node":      func(ctx context.Context, r request) (any, error) { return dp.Node(ctx, r.Node) },
		"image":     func(ctx context.Context, _ request) (any, error) { return dp.DefaultInstanceManagerImage(ctx) },
		"ims":       func(ctx context.Context, r request) (any, error) { return dp.InstanceManagers(ctx, r.Node) },
		"volumes":   func(ctx context.Context, _ request) (any, error) { return dp.Volumes(ctx) },
		"volume":    func(ctx context.Context, r request) (any, error) { return dp.Volume(ctx, r.Volume) },
		"volumesOn": func(ctx context.Context, r request) (any, error) { return dp.VolumesOn(ctx, r.Node) },
		"targets":   func(ctx context.Context, _ request) (any, error) { return dp.TargetCounts(ctx) },
		"upgrader":  func(ctx context.Context, _ request) (any, error) { return dp.LonghornUpgrader(ctx) },
		"rebuild":   func(ctx context.Context, _ request) (any, error) { return dp.RebuildSettings(ctx) },
		"disks":     func(ctx context.Context, _ request) (any, error) { return dp.Disks(ctx) },
		"workloads": func(ctx context.Context, r request) (any, error) { return dp.Workloads(ctx, r.Node) },
		"snapshots": func(ctx context.Context, r request) (any, error) { return dp.Snapshots(ctx, r.Volume) },
		"act": func(ctx context.Context, r request) (any, error) {
			if r.Action == nil {
				return nil, fmt.Errorf("%w: an act call without its action", dataplane.ErrRefused)
			}
			return nil, r.Action.Apply(ctx, dp)
		},
		"targetAway": func(ctx context.Context, r request) (any, error) {
			return nil, dp.RecordTargetAway(ctx, r.Volume, r.Away)
		},
		"markPending": func(ctx context.Context, r request) (any, error) {
			return nil, dp.MarkUpgradePending(ctx, r.Node, r.Mark)
		},
		"hashRequest": func(ctx context.Context, r request) (any, error) {
			return nil, dp.RequestSnapshotHashing(ctx, r.Volume, r.At)
		},
		"replicaCount": func(ctx context.Context, r request) (any, error) {
			if r.Replicas == nil {
				return nil, fmt.Errorf("%w: a replicaCount call without its spec", dataplane.ErrRefused)
			}
			return nil, dp.SetReplicaCount(ctx, r.Volume, *r.Replicas)
		},
		"deleteReplica": func(ctx context.Context, r request) (any, error) {
			return nil, dp.DeleteReplica(ctx, r.Volume, r.Replica)
		},
	}
}

// Client is a dataplane.DataPlane served by a Server. Its actions are one
// call, "act", carrying the dataplane.Action.
type Client struct {
	dataplane.ActionsFunc
	nc      *nats.Conn
	prefix  string
	timeout time.Duration
	watch   watch
}

// NewClient returns a client calling prefix.<method> on nc.
func NewClient(nc *nats.Conn, prefix string) *Client {
	c := &Client{nc: nc, prefix: prefix, timeout: 5 * time.Second}
	c.ActionsFunc = c.act
	return c
}

// act asks the server to apply a.
func (c *Client) act(ctx context.Context, a dataplane.Action) error {
	return c.call(ctx, "act", request{Action: &a}, nil)
}

var _ dataplane.DataPlane = (*Client)(nil)

func (c *Client) call(ctx context.Context, method string, req request, out any) error {
	b, _ := json.Marshal(req)
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	m, err := c.nc.RequestWithContext(ctx, c.prefix+"."+method, b)
	if err != nil {
		return fmt.Errorf("simulated cluster %s: %w", method, err)
	}
	var rep reply
	if err := json.Unmarshal(m.Data, &rep); err != nil {
		return fmt.Errorf("simulated cluster %s: bad reply: %w", method, err)
	}
	switch {
	case rep.Kind == "notfound":
		return fmt.Errorf("%w: %s", dataplane.ErrNotFound, rep.Error)
	case rep.Kind == "refused":
		return fmt.Errorf("%w: %s", dataplane.ErrRefused, rep.Error)
	case rep.Kind == "switchingpaths":
		return fmt.Errorf("%w: %s", dataplane.ErrSwitchingPaths, rep.Error)
	case rep.Kind == "inengine":
		return fmt.Errorf("%w: %s", dataplane.ErrReplicaInEngine, rep.Error)
	case rep.Kind == "budget":
		return fmt.Errorf("%w: %s", dataplane.ErrDisruptionBudget, rep.Error)
	case rep.Error != "":
		return errors.New(rep.Error)
	}
	if out != nil && rep.Result != nil {
		return json.Unmarshal(rep.Result, out)
	}
	return nil
}

// Platform implements dataplane.Reader.
func (c *Client) Platform(ctx context.Context) (out dataplane.Platform, err error) {
	return out, c.call(ctx, "platform", request{}, &out)
}

// Nodes implements dataplane.Reader.
func (c *Client) Nodes(ctx context.Context) (out []dataplane.Node, err error) {
	return out, c.call(ctx, "nodes", request{}, &out)
}

// Node implements dataplane.Reader.
func (c *Client) Node(ctx context.Context, name string) (out dataplane.Node, err error) {
	return out, c.call(ctx, "node", request{Node: name}, &out)
}

// DefaultInstanceManagerImage implements dataplane.Reader.
func (c *Client) DefaultInstanceManagerImage(ctx context.Context) (out string, err error) {
	return out, c.call(ctx, "image", request{}, &out)
}

// InstanceManagers implements dataplane.Reader.
func (c *Client) InstanceManagers(ctx context.Context, node string) (out []dataplane.InstanceManager, err error) {
	return out, c.call(ctx, "ims", request{Node: node}, &out)
}

// Volumes implements dataplane.Reader.
func (c *Client) Volumes(ctx context.Context) (out []dataplane.Volume, err error) {
	return out, c.call(ctx, "volumes", request{}, &out)
}

// Volume implements dataplane.Reader.
func (c *Client) Volume(ctx context.Context, name string) (out dataplane.Volume, err error) {
	return out, c.call(ctx, "volume", request{Volume: name}, &out)
}

// VolumesOn implements dataplane.Reader.
func (c *Client) VolumesOn(ctx context.Context, node string) (out []dataplane.Volume, err error) {
	return out, c.call(ctx, "volumesOn", request{Node: node}, &out)
}

// TargetCounts implements dataplane.Reader.
func (c *Client) TargetCounts(ctx context.Context) (out map[string]int, err error) {
	return out, c.call(ctx, "targets", request{}, &out)
}

// LonghornUpgrader implements dataplane.Reader.
func (c *Client) LonghornUpgrader(ctx context.Context) (out dataplane.LonghornUpgrader, err error) {
	return out, c.call(ctx, "upgrader", request{}, &out)
}

// Disks implements dataplane.Reader.
func (c *Client) Disks(ctx context.Context) (out map[string][]dataplane.Disk, err error) {
	return out, c.call(ctx, "disks", request{}, &out)
}

// RebuildSettings implements dataplane.Reader.
func (c *Client) RebuildSettings(ctx context.Context) (out dataplane.RebuildSettings, err error) {
	return out, c.call(ctx, "rebuild", request{}, &out)
}

// Workloads implements dataplane.Reader.
func (c *Client) Workloads(ctx context.Context, node string) (out dataplane.Workloads, err error) {
	return out, c.call(ctx, "workloads", request{Node: node}, &out)
}

// RecordTargetAway implements dataplane.TargetRecorder.
func (c *Client) RecordTargetAway(ctx context.Context, volume string, away *dataplane.TargetAway) error {
	return c.call(ctx, "targetAway", request{Volume: volume, Away: away}, nil)
}

// Snapshots implements dataplane.Reader.
func (c *Client) Snapshots(ctx context.Context, volume string) (out []dataplane.Snapshot, err error) {
	return out, c.call(ctx, "snapshots", request{Volume: volume}, &out)
}

// RequestSnapshotHashing implements dataplane.SnapshotHasher.
func (c *Client) RequestSnapshotHashing(ctx context.Context, volume string, at time.Time) error {
	return c.call(ctx, "hashRequest", request{Volume: volume, At: at}, nil)
}

// SetReplicaCount implements dataplane.ReplicaCounter.
func (c *Client) SetReplicaCount(ctx context.Context, volume string, spec dataplane.ReplicaSpec) error {
	return c.call(ctx, "replicaCount", request{Volume: volume, Replicas: &spec}, nil)
}

// DeleteReplica implements dataplane.ReplicaCounter.
func (c *Client) DeleteReplica(ctx context.Context, volume, replica string) error {
	return c.call(ctx, "deleteReplica", request{Volume: volume, Replica: replica}, nil)
}

// MarkUpgradePending implements dataplane.NodeMarker.
func (c *Client) MarkUpgradePending(ctx context.Context, node, mark string) error {
	return c.call(ctx, "markPending", request{Node: node, Mark: mark}, nil)
}
