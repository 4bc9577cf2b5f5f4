package projector

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/switchback-dev/switchback/internal/periodic"

	"github.com/nats-io/nats.go/jetstream"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// errGone reports that the object a write was for no longer exists, or is
// another incarnation (same name, other UID): there is nothing to write, and
// retrying would not change that.
var errGone = errors.New("object gone")

// permanentError wraps an error that retrying cannot fix: the apiserver
// refused the request itself (invalid, bad request), not the moment; or the
// object in the way is not ours to change.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// isPermanent reports whether the apiserver refused the request as such.
// Everything else (conflicts, timeouts, 5xx, 429, refused connections, even
// Forbidden, which an operator fixes with RBAC) is worth retrying.
func isPermanent(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsMethodNotSupported(err) ||
		apierrors.IsNotAcceptable(err) || apierrors.IsUnsupportedMediaType(err) || apierrors.IsRequestEntityTooLargeError(err)
}

// retry runs attempt until it succeeds, returns errGone or a permanent
// error, or ctx ends. Each attempt is bounded by timeout (0 = none) so a
// hung connection cannot hold the projection; the retries themselves are
// not bounded, because giving up would mean dropping history (the message
// is kept alive meanwhile by keepAlive). Backoff doubles from RetryBase to
// RetryMax, with jitter; a conflict is retried after RetryBase only, since
// the fresh read the next attempt makes resolves it.
func (p *Projector) retry(ctx context.Context, log *slog.Logger, what string, timeout time.Duration, attempt func(context.Context) error) error {
	delay := p.cfg.RetryBase
	for try := 1; ; try++ {
		actx, cancel := ctx, context.CancelFunc(func() {})
		if timeout > 0 {
			actx, cancel = context.WithTimeout(ctx, timeout)
		}
		err := attempt(actx)
		cancel()
		switch {
		case err == nil:
			return nil
		case errors.Is(err, errGone):
			return err
		case ctx.Err() != nil:
			return ctx.Err()
		case isPermanent(err):
			return &permanentError{err}
		}
		var perm *permanentError
		if errors.As(err, &perm) {
			return perm
		}
		p.m.writeRetries.Add(1)
		wait := delay
		if apierrors.IsConflict(err) {
			wait = p.cfg.RetryBase
			log.Debug("conflict; retrying with a fresh read", "what", what, "attempt", try, "error", err)
		} else {
			if s, ok := apierrors.SuggestsClientDelay(err); ok && time.Duration(s)*time.Second > wait {
				wait = time.Duration(s) * time.Second
			}
			delay = min(delay*2, p.cfg.RetryMax)
			log.Warn("retrying", "what", what, "attempt", try, "retryIn", wait, "error", err)
		}
		// ±20% jitter, so that several projectors (or a projector and the
		// intake) do not retry in lockstep against a recovering apiserver.
		wait = time.Duration(float64(wait) * (0.8 + 0.4*rand.Float64()))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// keepAlive tells JetStream every interval that msgs are still being worked
// on, until the returned function is called: a write retried through an
// apiserver outage must not have its messages redelivered (to this or
// another projector) meanwhile. An InProgress for a message acked since is
// ignored by the server.
func keepAlive(msgs []jetstream.Msg, interval time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	go periodic.Every(ctx, interval, func() {
		for _, m := range msgs {
			_ = m.InProgress()
		}
	})
	return cancel
}
