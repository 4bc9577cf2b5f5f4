// Package nodequeue carries node commands from the orchestrator to node
// workers over a JetStream stream: one subject and one durable pull consumer
// per node, explicit acks, a short AckWait kept alive by InProgress heartbeats
// during long steps, bounded redelivery with back-off, and a dead-letter
// stream for commands that exhaust their deliveries.
//
// The stream keeps acknowledged commands (limits retention, the last
// topology.CommandsKeptPerNode of each node) rather than deleting them on ack as a
// work-queue stream would: a consumer's ack floor already says what was
// done, and a work-queue stream makes the server ask every other consumer
// whether it still needs the message on every ack. With a consumer per node
// that check grew with the cluster and cost more than half a millisecond a
// step at 1000 nodes (BENCHMARKS.md). The kept commands are also a record of
// what each worker was asked to do.
package nodequeue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/topology"
)

// Kind says what a command asks of a node worker.
type Kind string

// Command kinds. A worker always acts on the node aggregate's recorded state,
// so one kind, Advance, drives every step: it means "make progress on the
// node upgrade from Step". A cancel request is recorded on the node aggregate
// before its Advance is sent, so the worker sees it when it loads the node.
const (
	Advance Kind = "advance"
)

// Command is one message on a node's queue.
type Command struct {
	// ID is deterministic (manager uid, node, attempt, step), so a re-issued
	// command deduplicates and a redelivered one is recognised.
	ID                   string            `json:"id"`
	Kind                 Kind              `json:"kind"`
	Manager              events.ManagerRef `json:"manager"`
	Node                 string            `json:"node"`
	Attempt              int               `json:"attempt"`
	Step                 events.NodeState  `json:"step"`
	DataEngine           string            `json:"dataEngine"`
	InstanceManagerImage string            `json:"instanceManagerImage"`
	// InitiatorPolicy is the manager's spec.initiatorPolicy, which the node
	// upgrade starts with.
	InitiatorPolicy string `json:"initiatorPolicy,omitempty"`
	// ReplicaPolicy is the manager's spec.replicaPolicy, which the node
	// upgrade starts with.
	ReplicaPolicy string    `json:"replicaPolicy,omitempty"`
	IssuedAt      time.Time `json:"issuedAt"`
}

// Validate reports missing fields.
func (c Command) Validate() error {
	var errs []error
	if c.ID == "" {
		errs = append(errs, errors.New("id is required"))
	}
	if c.Kind != Advance {
		errs = append(errs, fmt.Errorf("unknown kind %q", c.Kind))
	}
	if err := events.NodeAggregate(c.Manager, c.Node).Validate(); err != nil || c.Node == "" {
		errs = append(errs, fmt.Errorf("manager and node are required"))
	}
	if c.Attempt < 1 {
		errs = append(errs, fmt.Errorf("attempt %d must be >= 1", c.Attempt))
	}
	if !c.Step.Valid() {
		errs = append(errs, fmt.Errorf("unknown step %q", c.Step))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("command %q: %w", c.ID, err)
	}
	return nil
}

// Config tunes delivery.
type Config struct {
	Replicas int
	// AckWait is short so a dead worker's command comes back quickly; live
	// workers extend it with InProgress. Default 10s.
	AckWait time.Duration
	// MaxDeliver bounds redelivery; past it the command is dead-lettered. Default 8.
	MaxDeliver int
	// BackOff spaces redeliveries after a failure (Nak or timeout).
	BackOff []time.Duration
	// DuplicateWindow bounds Nats-Msg-Id dedup of re-issued commands. Default 2m.
	DuplicateWindow time.Duration
}

func (c *Config) defaults() {
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.AckWait == 0 {
		c.AckWait = 10 * time.Second
	}
	if c.MaxDeliver == 0 {
		c.MaxDeliver = 8
	}
	if c.BackOff == nil {
		// With BackOff set, JetStream uses BackOff[n-1] as the ack wait of the
		// n-th delivery, so the first entry must be AckWait itself.
		a := c.AckWait
		c.BackOff = []time.Duration{a, 2 * a, 3 * a, 6 * a, 6 * a, 6 * a}
	}
	// JetStream requires MaxDeliver > len(BackOff).
	if len(c.BackOff) >= c.MaxDeliver {
		c.BackOff = c.BackOff[:c.MaxDeliver-1]
	}
	if c.DuplicateWindow == 0 {
		c.DuplicateWindow = 2 * time.Minute
	}
}

// Queue publishes commands and opens node consumers.
type Queue struct {
	js  jetstream.JetStream
	cfg Config
	cmd jetstream.Stream
	dlq jetstream.Stream
}

// Open creates or updates the command and dead-letter streams.
func Open(ctx context.Context, js jetstream.JetStream, cfg Config) (*Queue, error) {
	cfg.defaults()
	cmd, err := js.CreateOrUpdateStream(ctx, topology.CommandStreamConfig(cfg.Replicas, cfg.DuplicateWindow))
	if err != nil {
		return nil, fmt.Errorf("nodequeue: stream %s: %w", topology.CommandStream, explainRetention(ctx, js, err))
	}
	dlq, err := js.CreateOrUpdateStream(ctx, topology.DeadLetterStreamConfig(cfg.Replicas))
	if err != nil {
		return nil, fmt.Errorf("nodequeue: stream %s: %w", topology.DeadLetterStream, err)
	}
	return &Queue{js: js, cfg: cfg, cmd: cmd, dlq: dlq}, nil
}

// explainRetention adds to err what to do when the command stream exists
// with work-queue retention, which JetStream cannot change in place.
func explainRetention(ctx context.Context, js jetstream.JetStream, err error) error {
	st, serr := js.Stream(ctx, topology.CommandStream)
	if serr != nil || st.CachedInfo().Config.Retention != jetstream.WorkQueuePolicy {
		return err
	}
	return fmt.Errorf("%w: the stream has work-queue retention and this version keeps commands "+
		"(limits retention), which JetStream cannot change in place; once no upgrade is in flight "+
		"(every manager completed or failed), delete it (nats stream rm %s) and restart the controller, "+
		"which recreates it and the node consumers, and then the workers", err, topology.CommandStream)
}

// Publish puts cmd on its node's queue, deduplicated by command id. It
// returns true when the command was already there (a re-issue).
func (q *Queue) Publish(ctx context.Context, cmd Command) (duplicate bool, err error) {
	if err := cmd.Validate(); err != nil {
		return false, fmt.Errorf("nodequeue: publish: %w", err)
	}
	data, err := json.Marshal(cmd)
	if err != nil {
		return false, fmt.Errorf("nodequeue: publish %s: %w", cmd.ID, err)
	}
	msg := nats.NewMsg(topology.CommandSubject(cmd.Node))
	msg.Data = data
	msg.Header.Set("content-type", "application/json")
	msg.Header.Set("sb-command-kind", string(cmd.Kind))
	ack, err := q.js.PublishMsg(ctx, msg, jetstream.WithMsgID(cmd.ID))
	if err != nil {
		return false, fmt.Errorf("nodequeue: publish %s to %s: %w", cmd.ID, msg.Subject, err)
	}
	return ack.Duplicate, nil
}

// NodeConsumer creates or updates the durable consumer of node's queue.
func (q *Queue) NodeConsumer(ctx context.Context, node string) (jetstream.Consumer, error) {
	c, err := q.js.CreateOrUpdateConsumer(ctx, topology.CommandStream, topology.NodeConsumerConfig(node, q.cfg.AckWait, q.cfg.MaxDeliver, q.cfg.BackOff))
	if err != nil {
		return nil, fmt.Errorf("nodequeue: consumer for node %s: %w", node, err)
	}
	return c, nil
}

// Config returns the effective configuration.
func (q *Queue) Config() Config { return q.cfg }

// DecodeCommand parses a command message. Bad input is a typed error.
func DecodeCommand(data []byte) (Command, error) {
	var c Command
	if err := json.Unmarshal(data, &c); err != nil {
		return Command{}, fmt.Errorf("%w: %v", ErrBadCommand, err)
	}
	if err := c.Validate(); err != nil {
		return Command{}, fmt.Errorf("%w: %v", ErrBadCommand, err)
	}
	return c, nil
}

// ErrBadCommand marks a command message that cannot be decoded or validated.
var ErrBadCommand = errors.New("bad command")

// Outstanding counts the commands the node consumers have not finished:
// waiting, or delivered and not yet acknowledged. The stream keeps done
// commands, so its message count says nothing about this.
func (q *Queue) Outstanding(ctx context.Context) (uint64, error) {
	var n uint64
	l := q.cmd.ListConsumers(ctx)
	for ci := range l.Info() {
		n += ci.NumPending + uint64(ci.NumAckPending)
	}
	if err := l.Err(); err != nil {
		return 0, fmt.Errorf("nodequeue: list consumers of %s: %w", topology.CommandStream, err)
	}
	return n, nil
}

// CommandStreamInfo returns the command stream's state (for tests and metrics).
func (q *Queue) CommandStreamInfo(ctx context.Context) (*jetstream.StreamInfo, error) {
	return q.cmd.Info(ctx)
}

// EnsureNodeConsumers creates or updates the durable consumer of each node's
// command queue. A worker bound to the streams (natsauth.BindOnly) cannot
// create its consumer, so the controller runs this at start-up (and whenever
// a node joins) with its own connection. It is idempotent.
func (q *Queue) EnsureNodeConsumers(ctx context.Context, nodes ...string) error {
	var errs []error
	for _, n := range nodes {
		if _, err := q.NodeConsumer(ctx, n); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("nodequeue: node consumers: %w", err)
	}
	return nil
}
