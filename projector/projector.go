package projector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	k8sevents "k8s.io/client-go/tools/events"

	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/kubeclient"
	"github.com/switchback-dev/switchback/topology"
)

// Defaults for Config.
const (
	// DefaultAckWait is Config.AckWait's default.
	DefaultAckWait = 30 * time.Second
	// DefaultBatch is Config.Batch's default.
	DefaultBatch = 32
	// DefaultWriteTimeout is Config.WriteTimeout's default.
	DefaultWriteTimeout = 10 * time.Second
	// DefaultRetryBase is Config.RetryBase's default.
	DefaultRetryBase = 50 * time.Millisecond
	// DefaultRetryMax is Config.RetryMax's default.
	DefaultRetryMax = 5 * time.Second
	// DefaultEventMaxAge is Config.EventMaxAge's default: the apiserver's
	// default Event TTL.
	DefaultEventMaxAge = time.Hour
)

// Config wires a Projector.
type Config struct {
	// Store is the event store; its stream is consumed.
	Store *eventstore.Store
	// Client reads and writes the longhorn.io/v1beta2 resources.
	Client *kubeclient.Client
	// Events is the clientset Kubernetes Events are written with
	// (events.k8s.io/v1). Required unless Recorder is set.
	Events kubernetes.Interface
	// Recorder, when set, records the Events instead of a broadcaster over
	// Events (the caller owns it).
	Recorder k8sevents.EventRecorder

	// Consumer is the durable consumer's name; default topology.ProjectorConsumer.
	Consumer string
	// AckWait is how long JetStream waits for an ack before redelivering;
	// the projector sends InProgress every AckWait/3 while a message takes
	// long (apiserver retries). Default DefaultAckWait.
	AckWait time.Duration
	// Batch bounds the messages fetched at once. Their events are folded
	// together and each manager's objects written once for the batch; all
	// of them are kept alive with InProgress until acked, so none times out
	// behind a slow write. Default DefaultBatch.
	Batch int
	// WriteTimeout bounds one apiserver request. Default DefaultWriteTimeout.
	WriteTimeout time.Duration
	// RetryBase and RetryMax bound the backoff between retries.
	RetryBase, RetryMax time.Duration
	// EventMaxAge: transitions older than this are not announced as
	// Kubernetes Events when (re)projected, e.g. on a replay of old history
	// after a wipe. Default DefaultEventMaxAge (the apiserver's default
	// Event TTL); negative = no limit.
	EventMaxAge time.Duration
	// Log receives structured logs (keys manager, uid, node, volume, seq).
	Log *slog.Logger
	// Now is the clock for EventMaxAge; default time.Now.
	Now func() time.Time
}

// Projector projects the event stream onto the Kubernetes resources. Run it
// once; create a new Projector to run again.
type Projector struct {
	cfg Config
	log *slog.Logger
	m   counters
	rec *recorder

	// The rest is owned by Run's goroutine.

	// entries holds the managers being projected, by UID.
	entries map[string]*entry
	// gone holds UIDs with no DataEngineUpgradeManager of that UID: deleted,
	// replaced by another incarnation, or never in Kubernetes (the demo).
	// A UID is never reused, so once gone, always gone.
	gone map[string]struct{}
	// lastSeq is the highest stream sequence handled; epoch changes
	// whenever the delivery skipped ahead, after which no cached view may
	// be extended without reading the stream (see project).
	lastSeq uint64
	epoch   uint64
	// listed holds, by namespace, the last LIST of its managers (see
	// listedManager).
	listed map[string]*nsIndex
	// series holds, by manager (namespace/name, as the metrics' label),
	// the per-node Prometheus series this projector set.
	series map[string]series
}

// nsIndex is one namespace's DataEngineUpgradeManagers as a LIST showed
// them, by UID.
type nsIndex struct {
	// upTo is the stream's last sequence, read before the LIST began. A
	// manager's events are appended only after its object exists (the
	// intake appends the first once it sees the object), so for an event at
	// or below upTo the LIST is as good as a read made then: a UID it lacks
	// had been deleted (or replaced, or never was in Kubernetes), and a UID
	// never comes back.
	upTo  uint64
	byUID map[string]*v1beta2.DataEngineUpgradeManager
}

// entry is one manager being projected: its fold and the objects last read
// or written, whose resourceVersion the next write is conditioned on.
type entry struct {
	view *view
	// epoch is the delivery epoch in which view is known to have seen every
	// event of the manager up to lastSeq; 0 = unknown.
	epoch    uint64
	obj      *v1beta2.DataEngineUpgradeManager
	nodeObjs map[string]*v1beta2.NodeDataEngineUpgrade
}

// maxGone bounds the memory of unknown managers; forgetting costs one read.
const maxGone = 10000

// New validates cfg and returns a Projector.
func New(cfg Config) (*Projector, error) {
	if cfg.Store == nil || cfg.Client == nil {
		return nil, errors.New("projector: Store and Client are required")
	}
	if cfg.Events == nil && cfg.Recorder == nil {
		return nil, errors.New("projector: Events (or Recorder) is required: every transition is a Kubernetes Event")
	}
	if cfg.Consumer == "" {
		cfg.Consumer = topology.ProjectorConsumer
	}
	if cfg.AckWait <= 0 {
		cfg.AckWait = DefaultAckWait
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.RetryBase <= 0 {
		cfg.RetryBase = DefaultRetryBase
	}
	if cfg.RetryMax < cfg.RetryBase {
		cfg.RetryMax = max(DefaultRetryMax, cfg.RetryBase)
	}
	if cfg.EventMaxAge == 0 {
		cfg.EventMaxAge = DefaultEventMaxAge
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	p := &Projector{
		cfg:     cfg,
		log:     cfg.Log.With("component", "projector"),
		entries: map[string]*entry{},
		gone:    map[string]struct{}{},
		listed:  map[string]*nsIndex{},
		series:  map[string]series{},
		epoch:   1,
	}
	p.rec = &recorder{rec: cfg.Recorder, log: p.log, maxAge: cfg.EventMaxAge, now: cfg.Now, count: &p.m.eventsRecorded}
	return p, nil
}

// Metrics returns the current counters.
func (p *Projector) Metrics() Metrics { return p.m.snapshot() }

// Run consumes the event stream until ctx ends and returns ctx's error (or
// the error that made consuming impossible). The dead-letter stream
// (topology.DeadLetterStream, created by nodequeue.Open) must exist.
func (p *Projector) Run(ctx context.Context) error {
	defer p.forgetAll()
	js := p.cfg.Store.JetStream()
	if _, err := js.Stream(ctx, topology.DeadLetterStream); err != nil {
		return fmt.Errorf("projector: dead-letter stream %s (nodequeue.Open creates it): %w", topology.DeadLetterStream, err)
	}
	if p.rec.rec == nil {
		// The Events of the last transitions before a stop get a grace
		// period to be written: cancelling their writes with ctx would lose
		// exactly the news a restart is about.
		sinkCtx, cancelSink := context.WithCancel(context.WithoutCancel(ctx))
		defer time.AfterFunc(eventFlushGrace, cancelSink)
		b := k8sevents.NewBroadcaster(&k8sevents.EventSinkImpl{Interface: p.cfg.Events.EventsV1()})
		if err := b.StartRecordingToSinkWithContext(sinkCtx); err != nil {
			cancelSink()
			return fmt.Errorf("projector: start event recording: %w", err)
		}
		defer b.Shutdown()
		p.rec.rec = b.NewRecorder(kubeclient.Scheme, ReportingController)
	}
	_, err := js.CreateOrUpdateConsumer(ctx, p.cfg.Store.Stream(), topology.ProjectorConsumerConfig(p.cfg.Consumer, p.cfg.AckWait))
	if err != nil {
		return fmt.Errorf("projector: consumer %s: %w", p.cfg.Consumer, err)
	}
	p.log.Info("projecting", "stream", p.cfg.Store.Stream(), "consumer", p.cfg.Consumer)
	delay := p.cfg.RetryBase
	// What a previous projector, or this one before its connection was
	// lost, was delivered and never acknowledged comes again at once.
	rewind := p.cfg.Store.Rewinder(p.cfg.Consumer)
	for {
		if _, err := rewind.Check(ctx); err != nil {
			p.log.Warn("rewind to the first unacknowledged event: what was in flight comes after the consumer's AckWait", "error", err)
		}
		msgs, err := p.fetch(ctx)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, nats.ErrConnectionClosed):
			return fmt.Errorf("projector: %w", err)
		case err != nil:
			p.log.Warn("fetching events", "error", err, "retryIn", delay)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(delay):
			}
			delay = min(2*delay, p.cfg.RetryMax)
			continue
		}
		delay = p.cfg.RetryBase
		if err := p.handleBatch(ctx, msgs); err != nil {
			return err
		}
	}
}

// eventFlushGrace is how long Events recorded before Run returns may still
// be written.
const eventFlushGrace = 5 * time.Second

// listAhead is the backlog (messages the consumer has not delivered yet)
// from which a manager seen for the first time is looked up in a LIST of its
// namespace rather than read on its own. Going through a long history (a
// new projector, a consumer reset to re-project) meets thousands of
// managers, most of them deleted long ago: one read each would cost as many
// apiserver round trips, minutes under a client-side rate limit, where one
// LIST answers for all of them.
const listAhead = 64

// entryFor returns the entry of the manager ref, reading its
// DataEngineUpgradeManager on first sight (or finding it in a LIST of its
// namespace while a backlog is worked off); nil when there is none of that
// UID. seq is the stream sequence of the event being folded and pending the
// messages delivered after it. Reads are retried while the apiserver is
// unavailable: deciding "no object" on an outage would drop the manager's
// history.
func (p *Projector) entryFor(ctx context.Context, ref events.ManagerRef, seq, pending uint64, log *slog.Logger) (*entry, error) {
	if _, gone := p.gone[ref.UID]; gone {
		return nil, nil
	}
	if e := p.entries[ref.UID]; e != nil {
		return e, nil
	}
	if obj, known := p.listedManager(ctx, ref, seq, pending, log); known {
		if obj == nil {
			p.markGone(ref.UID)
			return nil, nil
		}
		e := &entry{view: newView(ref), obj: obj, nodeObjs: map[string]*v1beta2.NodeDataEngineUpgrade{}}
		p.entries[ref.UID] = e
		return e, nil
	}
	var obj *v1beta2.DataEngineUpgradeManager
	err := p.retry(ctx, log, "read the manager", p.cfg.WriteTimeout, func(ctx context.Context) error {
		var err error
		obj, err = p.readManager(ctx, ref)
		return err
	})
	var perm *permanentError
	switch {
	case errors.Is(err, errGone):
		p.markGone(ref.UID)
		return nil, nil
	case errors.As(err, &perm):
		log.Error("reading the manager was refused; not projected", "error", err)
		return nil, nil
	case err != nil:
		return nil, err
	}
	e := &entry{view: newView(ref), obj: obj, nodeObjs: map[string]*v1beta2.NodeDataEngineUpgrade{}}
	p.entries[ref.UID] = e
	return e, nil
}

// listedManager looks ref up in the last LIST of its namespace, listing it
// afresh when the event at seq is newer than that LIST and a backlog of at
// least listAhead messages follows. known is false when no LIST answers
// (no backlog, or the LIST failed): the caller reads the object itself.
func (p *Projector) listedManager(ctx context.Context, ref events.ManagerRef, seq, pending uint64, log *slog.Logger) (obj *v1beta2.DataEngineUpgradeManager, known bool) {
	idx := p.listed[ref.Namespace]
	if idx == nil || seq > idx.upTo {
		if pending < listAhead {
			return nil, false
		}
		var err error
		if idx, err = p.listNamespace(ctx, ref.Namespace); err != nil {
			log.Warn("listing the namespace's managers failed; reading this one instead", "namespace", ref.Namespace, "error", err)
			return nil, false
		}
		p.listed[ref.Namespace] = idx
		log.Debug("listed the namespace's managers", "namespace", ref.Namespace, "managers", len(idx.byUID), "upTo", idx.upTo)
	}
	if seq > idx.upTo {
		return nil, false
	}
	return idx.byUID[ref.UID], true
}

// listNamespace lists the managers of ns, after reading the stream's last
// sequence.
func (p *Projector) listNamespace(ctx context.Context, ns string) (*nsIndex, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.WriteTimeout)
	defer cancel()
	upTo, err := p.cfg.Store.LastSequence(ctx)
	if err != nil {
		return nil, fmt.Errorf("last sequence of the stream: %w", err)
	}
	list, err := p.cfg.Client.Managers(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list the managers of %s: %w", ns, err)
	}
	idx := &nsIndex{upTo: upTo, byUID: make(map[string]*v1beta2.DataEngineUpgradeManager, len(list.Items))}
	for i := range list.Items {
		idx.byUID[string(list.Items[i].UID)] = &list.Items[i]
	}
	return idx, nil
}

// readManager reads the DataEngineUpgradeManager of ref; errGone when it does
// not exist or is another incarnation.
func (p *Projector) readManager(ctx context.Context, ref events.ManagerRef) (*v1beta2.DataEngineUpgradeManager, error) {
	obj, err := p.cfg.Client.Managers(ref.Namespace).Get(ctx, ref.Name)
	if apierrors.IsNotFound(err) {
		return nil, errGone
	}
	if err != nil {
		return nil, err
	}
	if string(obj.UID) != ref.UID {
		return nil, errGone
	}
	return obj, nil
}

func (p *Projector) markGone(uid string) {
	if len(p.gone) >= maxGone {
		clear(p.gone)
	}
	p.gone[uid] = struct{}{}
	delete(p.entries, uid)
}

// settled reports whether nothing more can happen to the manager: it is
// terminal and so is every node upgrade that started.
func (v *view) settled() bool {
	if !v.Manager.Terminal() {
		return false
	}
	for _, n := range v.Nodes {
		if n.Exists && !n.Terminal() {
			return false
		}
	}
	return true
}
