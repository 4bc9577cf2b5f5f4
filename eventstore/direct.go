package eventstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

// directMsg is one stored message a direct batch get returned, with what
// the server appended to it: only the last value of each of its headers
// is trusted (a stored message may carry copies of its own).
type directMsg struct {
	seq     uint64
	subject string
	header  nats.Header
	data    []byte
	at      time.Time
	// pending is how many more messages on the batch's subject the
	// answering replica holds after this one.
	pending uint64
}

// batchRequest is the body of a direct batch get.
type batchRequest struct {
	Seq     uint64 `json:"seq"`
	NextFor string `json:"next_by_subj"`
	Batch   int    `json:"batch"`
}

// directBatch runs one direct batch get of up to n messages on subject
// (wildcards allowed) from sequence from, and hands each to take in
// order. It returns how many came and how many more the answering replica
// says are pending on the subject. A batch nobody answers in time is
// nats.ErrTimeout (the caller's own deadline is its own), one the stream
// has no responder for nats.ErrNoResponders: transient, see patience.
//
// It reads the responses itself rather than through jetstreamext.GetBatch,
// which takes the first value of each header (so a stored copy of the
// server's headers fakes the sequence, and a bad stored timestamp fails the
// whole read) and ends a timed-out batch without an error (a silently short
// read).
func (s *Store) directBatch(ctx context.Context, subject string, from uint64, n int, take func(directMsg) error) (int, uint64, error) {
	nc := s.js.Conn()
	sub, err := subscribeRaw(nc, n+1)
	if err != nil {
		return 0, 0, err
	}
	defer sub.close()
	req, err := json.Marshal(batchRequest{Seq: from, NextFor: subject, Batch: n})
	if err != nil {
		return 0, 0, err
	}
	if err := nc.PublishRequest(s.apiPrefix()+"DIRECT.GET."+s.cfg.Stream, sub.subject, req); err != nil {
		return 0, 0, err
	}
	caller := ctx
	if _, ok := ctx.Deadline(); !ok {
		timeout := s.js.Options().DefaultTimeout
		if timeout <= 0 {
			timeout = nc.Opts.Timeout
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	got := 0
	var pending uint64
	after := from - 1
	for {
		m, err := sub.next(ctx)
		if err != nil {
			if caller.Err() == nil {
				err = nats.ErrTimeout // the batch's own timeout, not the caller's
			}
			return got, 0, err
		}
		seqs := m.Header.Values(hdrSequence)
		if len(seqs) == 0 {
			// A status, not a message: every stored message comes with the
			// server's Nats-Sequence, so a stored "Status: 204" header
			// cannot end the batch early.
			switch status := m.Header.Get(hdrStatus); status {
			case "204": // end of batch
				if p := last(m.Header, hdrNumPending); p != "" {
					if pending, err = strconv.ParseUint(p, 10, 64); err != nil {
						return got, 0, fmt.Errorf("end of batch: bad %s %q: %w", hdrNumPending, p, err)
					}
				}
				return got, pending, nil
			case "404": // nothing from `from`
				return got, 0, nil
			case "503":
				return got, 0, fmt.Errorf("stream %s: %w", s.cfg.Stream, nats.ErrNoResponders)
			default:
				return got, 0, fmt.Errorf("stream %s: direct get answered status %q %q", s.cfg.Stream, status, m.Header.Get(hdrDescription))
			}
		}
		seq, err := strconv.ParseUint(seqs[len(seqs)-1], 10, 64)
		if err != nil {
			return got, 0, fmt.Errorf("bad %s %q: %w", hdrSequence, seqs[len(seqs)-1], err)
		}
		if seq <= after {
			return got, 0, fmt.Errorf("direct get returned seq %d after seq %d: sequences must increase", seq, after)
		}
		if p := last(m.Header, hdrNumPending); p != "" {
			if pending, err = strconv.ParseUint(p, 10, 64); err != nil {
				return got, 0, fmt.Errorf("seq %d: bad %s %q: %w", seq, hdrNumPending, p, err)
			}
		}
		var at time.Time
		if ts := last(m.Header, hdrTimeStamp); ts != "" {
			at, _ = time.Parse(time.RFC3339Nano, ts) // a bad stamp only loses the time bound
		}
		got++
		after = seq
		if err := take(directMsg{seq: seq, subject: last(m.Header, hdrSubject), header: m.Header, data: m.Data, at: at, pending: pending}); err != nil {
			return got, 0, err
		}
	}
}
