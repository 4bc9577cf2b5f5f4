package eventstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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
			Subject string `json:"subject"`
			Seq     uint64 `json:"seq"`
			Hdrs    []byte `json:"hdrs"`
			Data    []byte `json:"data"`
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
	stored := &nats.Msg{Subject: resp.Message.Subject, Data: resp.Message.Data, Header: nats.Header{}}
	if len(resp.Message.Hdrs) > 0 {
		if stored.Header, err = nats.DecodeHeadersMsg(resp.Message.Hdrs); err != nil {
			// Not a message an append could have sent: compares unequal.
			stored = nil
		}
	}
	return lastOnSubject{Sequence: resp.Message.Seq, Msg: stored}, nil
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
