package eventstore

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/textproto"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchback-dev/switchback/events"
)

// lastOnSubject is the last stored message of one subject, as the stream
// leader sees it.
type lastOnSubject struct {
	Sequence uint64
	// EventID is the event's own id (its ce-id), which a message keeps when
	// its Nats-Msg-Id had to be replaced (see package dedup).
	EventID string
}

// leaderLast asks the stream leader (not a direct-get replica, which may lag)
// for the last message on subject: after a concurrency conflict the caller
// must learn the version that beat it, not a stale one.
func (s *Store) leaderLast(ctx context.Context, subject string) (lastOnSubject, error) {
	req, _ := json.Marshal(map[string]string{"last_by_subj": subject})
	apiSubj := s.js.Options().APIPrefix
	if apiSubj == "" {
		apiSubj = jetstream.DefaultAPIPrefix
	}
	apiSubj += "STREAM.MSG.GET." + s.cfg.Stream
	reply, err := s.js.Conn().RequestWithContext(ctx, apiSubj, req)
	if err != nil {
		return lastOnSubject{}, fmt.Errorf("eventstore: last message on %s: %w", subject, err)
	}
	var resp struct {
		Message *struct {
			Seq  uint64 `json:"seq"`
			Hdrs []byte `json:"hdrs"`
		} `json:"message"`
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(reply.Data, &resp); err != nil {
		return lastOnSubject{}, fmt.Errorf("eventstore: last message on %s: %w", subject, err)
	}
	if resp.Error != nil {
		if resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound {
			return lastOnSubject{}, nil
		}
		return lastOnSubject{}, fmt.Errorf("eventstore: last message on %s: %w", subject, resp.Error)
	}
	if resp.Message == nil {
		return lastOnSubject{}, nil
	}
	return lastOnSubject{Sequence: resp.Message.Seq, EventID: headerValue(resp.Message.Hdrs, events.HeaderPrefix+"id")}, nil
}

// headerValue reads one header from a raw "NATS/1.0" header block.
func headerValue(raw []byte, key string) string {
	r := textproto.NewReader(bufio.NewReader(bytes.NewReader(raw)))
	if _, err := r.ReadLine(); err != nil { // status line
		return ""
	}
	for {
		line, err := r.ReadLine()
		if err != nil || line == "" {
			return ""
		}
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.EqualFold(strings.TrimSpace(k), key) {
			return strings.TrimSpace(v)
		}
	}
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
