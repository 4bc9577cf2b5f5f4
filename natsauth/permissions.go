package natsauth

import (
	"fmt"
	"slices"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/topology"
)

// jsAPI is JetStream's API prefix in the default (non-domain) setup.
const jsAPI = topology.JSAPI

// Permissions are one user's subject permissions. Allow lists are
// exhaustive: what is not allowed is denied. Deny lists are redundant with
// them on purpose (belt and braces): they keep the dangerous JetStream API
// calls denied should somebody later widen an allow list with a wildcard.
type Permissions struct {
	PublishAllow   []string
	PublishDeny    []string
	SubscribeAllow []string
	SubscribeDeny  []string
}

// Streams names what the permissions refer to. The zero value means the
// defaults of eventstore and nodequeue.
type Streams struct {
	// Events is the event stream; default topology.EventStream.
	Events string
	// Commands is the node command stream; default topology.CommandStream.
	Commands string
	// DeadLetters is the dead-letter stream; default topology.DeadLetterStream.
	DeadLetters string
	// SnapshotBucket is the KV bucket of snapshots; default topology.SnapshotBucket.
	SnapshotBucket string
}

func (s Streams) withDefaults() Streams {
	if s.Events == "" {
		s.Events = topology.EventStream
	}
	if s.Commands == "" {
		s.Commands = topology.CommandStream
	}
	if s.DeadLetters == "" {
		s.DeadLetters = topology.DeadLetterStream
	}
	if s.SnapshotBucket == "" {
		s.SnapshotBucket = topology.SnapshotBucket
	}
	return s
}

// InboxPrefix is the inbox prefix of node's worker: replies to its requests
// (JetStream API answers, pulled commands, publish acks) arrive under it, and
// it may subscribe under it only, so no worker reads another's replies. The
// worker's connection must use it (WorkerOptions).
func InboxPrefix(node string) string {
	return topology.InboxPrefix + "worker-" + events.EncodeToken(node)
}

// DangerousAPI lists the JetStream API calls that change what exists: stream
// and consumer creation, update, deletion, purge, message deletion, and the
// rest of the administrative surface. Only the controller may call them.
func DangerousAPI() []string {
	return []string{
		jsAPI + "STREAM.CREATE.>",
		jsAPI + "STREAM.UPDATE.>",
		jsAPI + "STREAM.DELETE.>",
		jsAPI + "STREAM.PURGE.>",
		jsAPI + "STREAM.MSG.DELETE.>",
		jsAPI + "STREAM.RESTORE.>",
		jsAPI + "STREAM.SNAPSHOT.>",
		jsAPI + "STREAM.PEER.>",
		jsAPI + "STREAM.LEADER.>",
		jsAPI + "CONSUMER.CREATE.>",
		jsAPI + "CONSUMER.DURABLE.CREATE.>",
		jsAPI + "CONSUMER.DELETE.>",
		jsAPI + "CONSUMER.PAUSE.>",
		jsAPI + "CONSUMER.UNPIN.>",
		jsAPI + "CONSUMER.RESET.>",
		jsAPI + "CONSUMER.LEADER.>",
		jsAPI + "META.>",
		jsAPI + "SERVER.>",
		jsAPI + "ACCOUNT.>",
	}
}

// WorkerPermissions are the permissions of node's worker, and exactly what
// nodeworker does on NATS:
//
//   - consume its node's commands: pull from its durable consumer, look the
//     consumer up, ack/nak/in-progress/term its deliveries;
//   - append its node's events (sb.evt.<ns>.<name>.<uid>.node.<node>; the
//     manager's tokens are wildcards because any manager may upgrade the
//     node);
//   - read history: direct batch gets on the event stream (the subject
//     filter is in the request body, so this cannot be narrowed to the node:
//     see docs/nats-authorization.md) and the leader's last-message get that
//     resolves an append conflict;
//   - read aggregate snapshots in the KV bucket, never write one (a writer
//     of the bucket could publish a Nats-Rollup and purge every key): its
//     store is opened with eventstore.Config.ReadOnlySnapshots, and the
//     controller refreshes them;
//   - refuse a command it cannot carry out (undecodable, misrouted, an
//     unknown manager's) with nodequeue.Terminate, an ack subject of its own
//     consumer: the controller parks it from JetStream's advisory, so the
//     worker neither reads commands by sequence nor writes the dead-letter
//     stream;
//   - look the streams up (stream info) when binding to them;
//   - subscribe under its own inbox prefix, and to its node's events (core
//     NATS, no consumer): a waiting step wakes on a cancel request the
//     orchestrator appends. It reads those events by direct get already,
//     so this adds no capability.
//
// extraPublish is appended to the allow list (topology.SimSubjects for a
// simulated cluster, whose workers then also subscribe to its change
// notices, topology.SimChanged, to wake on them).
func WorkerPermissions(node string, streams Streams, sharedInbox bool, extraPublish ...string) Permissions {
	s := streams.withDefaults()
	consumer := topology.NodeConsumer(node)
	kvStream := topology.KVStream(s.SnapshotBucket)
	allow := []string{
		// Binding to the streams (eventstore.Open, nodequeue.Open through BindOnly).
		jsAPI + "STREAM.INFO." + s.Events,
		jsAPI + "STREAM.INFO." + s.Commands,
		jsAPI + "STREAM.INFO." + s.DeadLetters,
		jsAPI + "STREAM.INFO." + kvStream,
		// Its own consumer: look it up, pull, and settle deliveries.
		jsAPI + "CONSUMER.INFO." + s.Commands + "." + consumer,
		jsAPI + "CONSUMER.MSG.NEXT." + s.Commands + "." + consumer,
		topology.Acks(s.Commands, consumer),
		// Its node's events, under any manager.
		events.NodeSubjects(node),
		// Loading aggregates: direct batch gets, and the leader's view of a
		// subject's last message after a concurrency conflict.
		jsAPI + "DIRECT.GET." + s.Events,
		jsAPI + "STREAM.MSG.GET." + s.Events,
		// Snapshots: get any (direct, last by subject: a worker reads its
		// node's and, before starting its node, the manager's); put none.
		jsAPI + "DIRECT.GET." + kvStream + "." + topology.KVSubjects(s.SnapshotBucket),
	}
	allow = append(allow, extraPublish...)
	inbox := InboxPrefix(node) + ".>"
	if sharedInbox {
		inbox = topology.InboxPrefix + ">"
	}
	subscribe := []string{inbox, events.NodeSubjects(node)}
	if slices.Contains(extraPublish, topology.SimSubjects) {
		subscribe = append(subscribe, topology.SimChanged)
	}
	return Permissions{
		PublishAllow:   allow,
		PublishDeny:    DangerousAPI(),
		SubscribeAllow: subscribe,
	}
}

// ReaderInboxPrefix is the inbox prefix of the read-only user: the only
// place it may subscribe, so it reads no other user's replies. `switchback
// history` and `switchback replay` always connect with it (ReaderOptions);
// the nats CLI takes it as --inbox-prefix.
const ReaderInboxPrefix = topology.InboxPrefix + "reader"

// ReaderPermissions are the permissions of the read-only user, for
// operators reading history without the controller's key: exactly what
// `switchback history` (with --follow) and `switchback replay` do, and the
// nats CLI's `stream info`, `stream get` and `sub --stream`, on the event
// stream and the dead-letter stream:
//
//   - look the streams up (stream info), and the snapshot bucket, which
//     eventstore.Open binds to (its configuration and counts only, none of
//     its keys);
//   - read messages: direct gets (batch, by sequence, last by subject) and
//     the leader's message get;
//   - ordered reads: create consumers (the name, and the filter subject when
//     there is one, are tokens of the API subject: nats.go's jetstream
//     package and the nats CLI always name their ephemeral consumers), pull
//     from them and delete them;
//   - subscribe under ReaderInboxPrefix only.
//
// The consumer calls cannot tell an ephemeral consumer from a durable one
// by subject, so the names of Switchback's own durable consumers on those
// streams (the projector's, the orchestrator's, the dead-letterer's) are
// denied: a reader cannot update, pull from or delete them. Publishing on
// any Switchback subject, acks, the administrative API and everything on
// the command stream are not allowed, and denied again.
func ReaderPermissions(streams Streams) Permissions {
	s := streams.withDefaults()
	kvStream := topology.KVStream(s.SnapshotBucket)
	allow := []string{jsAPI + "STREAM.INFO." + kvStream}
	var deny []string
	for _, st := range []struct {
		name     string
		durables []string
	}{
		{s.Events, []string{topology.ProjectorConsumer, topology.OrchestratorConsumer}},
		{s.DeadLetters, []string{topology.DeadLettererConsumer}},
	} {
		allow = append(allow,
			jsAPI+"STREAM.INFO."+st.name,
			jsAPI+"DIRECT.GET."+st.name,
			jsAPI+"DIRECT.GET."+st.name+".>",
			jsAPI+"STREAM.MSG.GET."+st.name,
			jsAPI+"CONSUMER.CREATE."+st.name+".*",
			jsAPI+"CONSUMER.CREATE."+st.name+".*.>",
			jsAPI+"CONSUMER.MSG.NEXT."+st.name+".*",
			jsAPI+"CONSUMER.DELETE."+st.name+".*",
		)
		for _, d := range st.durables {
			deny = append(deny,
				jsAPI+"CONSUMER.CREATE."+st.name+"."+d,
				jsAPI+"CONSUMER.CREATE."+st.name+"."+d+".>",
				jsAPI+"CONSUMER.MSG.NEXT."+st.name+"."+d,
				jsAPI+"CONSUMER.DELETE."+st.name+"."+d,
			)
		}
	}
	for _, st := range []string{s.Commands, kvStream} {
		deny = append(deny, jsAPI+"CONSUMER.CREATE."+st+".>", jsAPI+"CONSUMER.DELETE."+st+".>")
	}
	for _, d := range DangerousAPI() {
		// Its own consumers it creates and deletes: allowed above, per
		// stream, and denied per durable name.
		if d != jsAPI+"CONSUMER.CREATE.>" && d != jsAPI+"CONSUMER.DELETE.>" {
			deny = append(deny, d)
		}
	}
	deny = append(deny, events.StreamSubjects, topology.CommandSubjects, topology.DeadLetterSubjects,
		topology.KVPrefix+">", topology.AckPrefix+">", topology.EventPrefix+">")
	return Permissions{
		PublishAllow:   allow,
		PublishDeny:    deny,
		SubscribeAllow: []string{ReaderInboxPrefix + ".>"},
	}
}

// ControllerPermissions are the controller's: everything. It creates and
// updates the streams and consumers, appends to every aggregate (intake,
// orchestrator, the cancel and dead-letter paths write node aggregates too),
// publishes every command, parks poison events and dead commands, reads and
// writes snapshots, and serves the projector, replay and history.
func ControllerPermissions() Permissions {
	return Permissions{
		PublishAllow:   []string{">"},
		SubscribeAllow: []string{">"},
	}
}

// validate rejects subjects nats-server would refuse or misread.
func (p Permissions) validate() error {
	for _, list := range [][]string{p.PublishAllow, p.PublishDeny, p.SubscribeAllow, p.SubscribeDeny} {
		for _, s := range list {
			if err := validSubject(s); err != nil {
				return err
			}
		}
	}
	return nil
}

func validSubject(s string) error {
	if s == "" {
		return fmt.Errorf("natsauth: empty subject in permissions")
	}
	toks := splitTokens(s)
	for i, t := range toks {
		switch {
		case t == "":
			return fmt.Errorf("natsauth: subject %q has an empty token", s)
		case t == ">" && i != len(toks)-1:
			return fmt.Errorf("natsauth: subject %q: '>' must be the last token", s)
		}
		if slices.ContainsFunc([]byte(t), func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '"' }) {
			return fmt.Errorf("natsauth: subject %q: whitespace or quote in token %q", s, t)
		}
	}
	return nil
}

func splitTokens(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// CalloutServicePermissions are the auth callout service's: it receives the
// server's authorization requests and answers each once (the rendered
// configuration adds allow_responses), nothing else; no JetStream at all.
func CalloutServicePermissions() Permissions {
	return Permissions{SubscribeAllow: []string{server.AuthCalloutSubject}}
}
