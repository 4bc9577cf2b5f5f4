package natsauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

// ConnectOptions returns the nats options that authenticate as u: the nkey
// signature callback (the seed stays in memory, never on the wire) or the
// user name and password, plus, for a worker or the reader, its inbox prefix.
func (u User) ConnectOptions() ([]nats.Option, error) {
	var opts []nats.Option
	c := u.Credential
	switch {
	case len(c.Seed) > 0:
		kp, err := nkeys.FromSeed(c.Seed)
		if err != nil {
			return nil, fmt.Errorf("natsauth: %s: seed: %w", c.User, err)
		}
		pub, err := kp.PublicKey()
		if err != nil {
			return nil, fmt.Errorf("natsauth: %s: public key: %w", c.User, err)
		}
		opts = append(opts, nats.Nkey(pub, kp.Sign))
	case c.Password != "":
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	default:
		return nil, fmt.Errorf("natsauth: %s: no seed and no password to connect with", c.User)
	}
	switch u.Role {
	case RoleWorker:
		opts = append(opts, WorkerOptions(u.Node)...)
	case RoleReader:
		opts = append(opts, ReaderOptions()...)
	}
	return opts, nil
}

// WorkerOptions are the connection options node's worker needs besides its
// credentials: its own inbox prefix, which is the only place it may
// subscribe. Wire them into the worker command's connection.
func WorkerOptions(node string) []nats.Option {
	return []nats.Option{nats.CustomInboxPrefix(InboxPrefix(node))}
}

// ReaderOptions are the connection options the reader needs besides its
// credentials: its inbox prefix (ReaderInboxPrefix), the only place it may
// subscribe. `switchback history` and `switchback replay` always connect
// with them, under whichever user.
func ReaderOptions() []nats.Option {
	return []nats.Option{nats.CustomInboxPrefix(ReaderInboxPrefix)}
}

// JetStream opens JetStream on nc under apiPrefix (Authorization.APIPrefix:
// a worker in its node's account reaches the API under
// topology.NodeAPIPrefix), or JetStream's default when it is empty.
func JetStream(nc *nats.Conn, apiPrefix string) (jetstream.JetStream, error) {
	if apiPrefix == "" {
		return jetstream.New(nc)
	}
	return jetstream.NewWithAPIPrefix(nc, apiPrefix)
}

// ErrBindOnly is returned by a BindOnly JetStream for calls that would create
// or change a stream, a consumer or a bucket.
var ErrBindOnly = errors.New("natsauth: this connection binds to existing streams and consumers only; the controller creates them")

// BindOnly wraps js so that create-or-update calls bind to what exists:
// CreateOrUpdateStream looks the stream up, CreateOrUpdateKeyValue the
// bucket, CreateOrUpdateConsumer the durable consumer. eventstore.Open,
// nodequeue.Open and nodeworker (through Queue.NodeConsumer) create-or-update
// at start-up, which a worker's permissions deny (an update can shrink a
// stream's limits and drop history); through BindOnly they work with the
// worker's permissions and leave the configuration to the controller. Pure
// creations and updates return ErrBindOnly; everything else is js's.
func BindOnly(js jetstream.JetStream) jetstream.JetStream { return bindOnly{js} }

type bindOnly struct{ jetstream.JetStream }

func (b bindOnly) CreateOrUpdateStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	s, err := b.JetStream.Stream(ctx, cfg.Name)
	if err != nil {
		return nil, fmt.Errorf("natsauth: bind to stream %s (the controller creates it; is it running?): %w", cfg.Name, err)
	}
	return s, nil
}

func (b bindOnly) CreateStream(_ context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	return nil, fmt.Errorf("create stream %s: %w", cfg.Name, ErrBindOnly)
}

func (b bindOnly) UpdateStream(_ context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	return nil, fmt.Errorf("update stream %s: %w", cfg.Name, ErrBindOnly)
}

func (b bindOnly) CreateOrUpdateKeyValue(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	kv, err := b.JetStream.KeyValue(ctx, cfg.Bucket)
	if err != nil {
		return nil, fmt.Errorf("natsauth: bind to bucket %s (the controller creates it; is it running?): %w", cfg.Bucket, err)
	}
	return kv, nil
}

func (b bindOnly) CreateKeyValue(_ context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	return nil, fmt.Errorf("create bucket %s: %w", cfg.Bucket, ErrBindOnly)
}

func (b bindOnly) UpdateKeyValue(_ context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	return nil, fmt.Errorf("update bucket %s: %w", cfg.Bucket, ErrBindOnly)
}

func (b bindOnly) CreateOrUpdateConsumer(ctx context.Context, stream string, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	name := cfg.Durable
	if name == "" {
		name = cfg.Name
	}
	if name == "" {
		return nil, fmt.Errorf("ephemeral consumer on %s: %w", stream, ErrBindOnly)
	}
	c, err := b.JetStream.Consumer(ctx, stream, name)
	if err != nil {
		return nil, fmt.Errorf("natsauth: bind to consumer %s on %s (the controller creates it: nodequeue.Queue.EnsureNodeConsumers): %w", name, stream, err)
	}
	return c, nil
}

func (b bindOnly) CreateConsumer(_ context.Context, stream string, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	return nil, fmt.Errorf("create consumer %s on %s: %w", cfg.Durable, stream, ErrBindOnly)
}

func (b bindOnly) UpdateConsumer(_ context.Context, stream string, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	return nil, fmt.Errorf("update consumer %s on %s: %w", cfg.Durable, stream, ErrBindOnly)
}

// Violations collects the permission violations the server reports on a
// connection. NATS reports a denied publish asynchronously (the publish
// itself "succeeds", and a request only times out), so this is where the
// clear error is: `nats: permissions violation: Permissions Violation for
// Publish to "<subject>"`. Install it with Option; Explain attaches the
// violation to the timeout it caused.
type Violations struct {
	// Log, when set, gets every violation at error level: a worker denied
	// something is a misconfiguration or an attack, never routine.
	Log *slog.Logger

	mu     sync.Mutex
	errs   []error
	notify chan struct{}
}

// Option installs v as the connection's error handler. Errors that are not
// permission violations are logged (when Log is set) and otherwise ignored,
// as the default handler does.
func (v *Violations) Option() nats.Option {
	return nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
		if !errors.Is(err, nats.ErrPermissionViolation) {
			if v.Log != nil {
				v.Log.Warn("nats asynchronous error", "error", err)
			}
			return
		}
		if v.Log != nil {
			v.Log.Error("NATS denied an operation: check the authorization (docs/nats-authorization.md)", "error", err)
		}
		v.mu.Lock()
		// Bounded: a worker denied in a retry loop must not grow forever.
		if len(v.errs) == maxViolations {
			v.errs = append(v.errs[:0], v.errs[1:]...)
		}
		v.errs = append(v.errs, err)
		if v.notify != nil {
			close(v.notify)
			v.notify = nil
		}
		v.mu.Unlock()
	})
}

// maxViolations is how many recent violations Violations keeps.
const maxViolations = 100

// All returns the violations seen so far (the latest 100), oldest first.
func (v *Violations) All() []error {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]error(nil), v.errs...)
}

// Find returns the latest violation naming subject, nil if none.
func (v *Violations) Find(subject string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	quoted := `"` + subject + `"`
	for i := len(v.errs) - 1; i >= 0; i-- {
		if strings.Contains(v.errs[i].Error(), quoted) {
			return v.errs[i]
		}
	}
	return nil
}

// Wait waits until a violation naming subject arrives, or ctx ends.
func (v *Violations) Wait(ctx context.Context, subject string) error {
	for {
		v.mu.Lock()
		if v.notify == nil {
			v.notify = make(chan struct{})
		}
		ch := v.notify
		v.mu.Unlock()
		if err := v.Find(subject); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("natsauth: no permission violation for %q: %w", subject, ctx.Err())
		case <-ch:
		}
	}
}

// Explain returns err joined with the permission violation on subject when
// there is one: a denied request surfaces as a timeout, which alone says
// nothing about permissions.
func (v *Violations) Explain(err error, subject string) error {
	if err == nil {
		return nil
	}
	if pv := v.Find(subject); pv != nil {
		return fmt.Errorf("%w (%w)", pv, err)
	}
	return err
}
