package eventstore

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A JetStream cluster has moments when a read finds nobody to answer it:
// right after the servers start, while a stream or the meta leader is
// elected again (4-9 s after a leader dies), or while a new consumer's
// interest crosses the routes to the server the client is on. The read
// then gets "no responders", a timeout or a 503, and a moment later the
// same read succeeds. Reads wait such a moment out, for readPatience since
// their last progress, and fail with the last error after it.

// readPatience is how long a read waits for a cluster to answer again.
var readPatience = 20 * time.Second

// errBehind is a read served by a server that lags the stream's leader.
var errBehind = errors.New("the server serving the read is behind the stream leader")

// transient reports whether err is one of the answers a cluster gives
// while it has no one to serve a read, or serves it from behind.
func transient(err error) bool {
	var api *jetstream.APIError
	switch {
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, nats.ErrTimeout), errors.Is(err, errBehind):
		return true
	case errors.As(err, &api):
		return api.Code == http.StatusServiceUnavailable
	}
	return false
}

// patience paces the retries of one read: doubling pauses from 20 ms up to
// a second, until readPatience has passed since the read last made
// progress (reset).
type patience struct {
	since time.Time
	wait  time.Duration
}

// reset marks progress: the next wait starts short again.
func (p *patience) reset() { p.since, p.wait = time.Time{}, 0 }

// pause waits before the read is tried again after err, or returns err
// (wrapped with how long the read waited) when it is not transient or the
// read has waited long enough.
func (p *patience) pause(ctx context.Context, err error) error {
	if !transient(err) {
		return err
	}
	now := time.Now()
	if p.since.IsZero() {
		p.since = now
	}
	if waited := now.Sub(p.since); waited >= readPatience {
		return fmt.Errorf("no answer for %s: %w", waited.Round(time.Millisecond), err)
	}
	p.wait = min(max(2*p.wait, 20*time.Millisecond), time.Second)
	t := time.NewTimer(p.wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return err
	case <-t.C:
		return nil
	}
}
