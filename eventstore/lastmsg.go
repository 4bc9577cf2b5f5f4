package eventstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchback-dev/switchback/dedup"
)

// lastOnSubject is the last stored message of one subject, as the stream
// leader sees it.
type lastOnSubject struct {
	Sequence uint64
	// Msg is the stored message (subject, headers, data), to compare with
	// what an append sent: an id alone can be copied by whoever may write
	// the subject.
	Msg *nats.Msg
}

// is reports whether the last message is m: the same subject, data and
// headers (JetStream's own aside, as dedup compares them).
func (l lastOnSubject) is(m *nats.Msg) bool {
	return l.Msg != nil && dedup.Same(l.Msg, m)
}

// leaderLast asks the stream leader (not a direct-get replica, which may lag)
// for the last message on subject: after a concurrency conflict the caller
// must learn the version that beat it, not a stale one. A message whose
// headers do not decode is returned without it: no append sent it, so it
// compares unequal to any.
func (s *Store) leaderLast(ctx context.Context, subject string) (lastOnSubject, error) {
	m, seq, err := dedup.GetLast(ctx, s.js, s.cfg.Stream, subject)
	if err != nil && !errors.Is(err, dedup.ErrUndecodableHeaders) {
		return lastOnSubject{}, fmt.Errorf("eventstore: last message on %s: %w", subject, err)
	}
	return lastOnSubject{Sequence: seq, Msg: m}, nil
}

// settledLast waits, briefly, for a concurrent writer's proposal to land.
// On replicated streams a conflict (10164) can be reported while the winning
// proposal is still in flight; reading at once would return the old version.
func (s *Store) settledLast(ctx context.Context, subject string, expected uint64) (lastOnSubject, error) {
	deadline := time.Now().Add(2 * time.Second)
	for {
		last, err := s.leaderLast(ctx, subject)
		if err != nil || last.Sequence != expected || time.Now().After(deadline) {
			return last, err
		}
		select {
		case <-ctx.Done():
			return last, nil
		case <-time.After(5 * time.Millisecond):
		}
	}
}
