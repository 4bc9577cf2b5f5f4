// Package dedup publishes to JetStream so that deduplication can never
// swallow a different message.
//
// Nats-Msg-Id deduplication is stream-wide: a message whose id is already in
// the duplicate window is not stored, and the publisher gets a "duplicate"
// acknowledgement carrying the sequence of the message that holds the id.
// Switchback's ids are deterministic (an event's id is derived from what
// caused it, a dead letter's from the parked sequence), so anyone allowed to
// publish anywhere on the stream could take the next id first, on a subject
// of its own, and the real message would be acknowledged and lost. Publish
// accepts a duplicate acknowledgement only when the message stored at that
// sequence is the one being published; otherwise the id was taken (a bug or a
// forged publish), which is counted and logged, and the message is published
// again under an id derived from its own content, so that a retry of it is
// still deduplicated.
package dedup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/switchback-dev/switchback/metrics"
	"github.com/switchback-dev/switchback/topology"
)

// Result is what Publish did.
type Result struct {
	// Ack is the stream's acknowledgement of the message as stored.
	Ack *jetstream.PubAck
	// Duplicate reports that the message was already stored (a retry of an
	// earlier success), at Ack.Sequence.
	Duplicate bool
	// Taken is the Nats-Msg-Id another message held, when the message had to
	// be published under another id; "" otherwise.
	Taken string
}

// derivedIDs is how many times a taken id is replaced by one derived from the
// message before a random one: derived ids keep retries idempotent (the same
// message gets the same id), and whoever could precompute them could as well
// publish the message itself, which is no loss.
const derivedIDs = 3

// Publish publishes m on stream through js (opts are passed on, e.g. an
// expected-sequence check). A duplicate acknowledgement is checked against
// the stored message; see the package documentation.
func Publish(ctx context.Context, js jetstream.JetStream, stream string, m *nats.Msg, opts ...jetstream.PublishOpt) (Result, error) {
	var r Result
	for attempt := 0; ; attempt++ {
		ack, err := js.PublishMsg(ctx, m, opts...)
		if err != nil {
			return r, err
		}
		r.Ack = ack
		if !ack.Duplicate {
			return r, nil
		}
		same, err := Holds(ctx, js, stream, ack.Sequence, m)
		if err != nil {
			return Result{}, fmt.Errorf("dedup: %s: check the duplicate of %s at sequence %d: %w", stream, m.Subject, ack.Sequence, err)
		}
		if same {
			r.Duplicate = true
			return r, nil
		}
		if r.Taken == "" {
			r.Taken = m.Header.Get(jetstream.MsgIDHeader)
		}
		Reissue(m, stream, ack.Sequence, attempt)
	}
}

// Reissue gives m another Nats-Msg-Id after its own was found taken by the
// message at sequence seq of stream (0 when the stream did not say which),
// and reports the collision. The attempt-th replacement is derived from m's
// content while attempt < derivedIDs, random after.
func Reissue(m *nats.Msg, stream string, seq uint64, attempt int) {
	id := m.Header.Get(jetstream.MsgIDHeader)
	metrics.DedupCollisions.WithLabelValues(stream).Inc()
	slog.Error("message id already taken by another message: publishing under another id",
		"stream", stream, "subject", m.Subject, "msgID", id, "takenBySequence", seq)
	Rename(m, attempt)
}

// Rename replaces m's Nats-Msg-Id, keeping the original as its prefix for
// whoever reads the stream: see Reissue for attempt.
func Rename(m *nats.Msg, attempt int) {
	id := m.Header.Get(jetstream.MsgIDHeader)
	suffix := nuid.Next()
	if attempt < derivedIDs {
		suffix = digest(m)
	}
	m.Header.Set(jetstream.MsgIDHeader, id+"~"+suffix)
}

// digest identifies m's content (what Same compares) in 16 bytes of hex.
func digest(m *nats.Msg) string {
	h := sha256.New()
	h.Write([]byte(m.Subject))
	h.Write([]byte{0})
	hdr := own(m.Header)
	keys := make([]string, 0, len(hdr))
	for k := range hdr {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, v := range hdr[k] {
			fmt.Fprintf(h, "%s:%s\x00", k, v)
		}
	}
	h.Write([]byte{0})
	h.Write(m.Data)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Holds reports whether the message stored at seq of stream is m: the same
// subject, data and headers, JetStream's own (Nats-*) aside. It asks the
// stream leader, which stored it.
func Holds(ctx context.Context, js jetstream.JetStream, stream string, seq uint64, m *nats.Msg) (bool, error) {
	stored, err := Get(ctx, js, stream, seq)
	if err != nil {
		return false, err
	}
	return stored != nil && Same(stored, m), nil
}

// Get reads the message at seq of stream from the stream leader; nil when
// there is none.
func Get(ctx context.Context, js jetstream.JetStream, stream string, seq uint64) (*nats.Msg, error) {
	m, _, err := leaderGet(ctx, js, stream, map[string]any{"seq": seq})
	return m, err
}

// GetLast reads the last message on subject from stream's leader (not a
// direct-get replica, which may lag) and its sequence; nil and 0 when there
// is none.
func GetLast(ctx context.Context, js jetstream.JetStream, stream, subject string) (*nats.Msg, uint64, error) {
	return leaderGet(ctx, js, stream, map[string]any{"last_by_subj": subject})
}

// GetNext is the sequence of the first message at or after seq on subject
// (wildcards allowed) as the stream leader has it, 0 when there is none: a
// consumer or a direct get served by a lagging replica cannot say.
func GetNext(ctx context.Context, js jetstream.JetStream, stream string, seq uint64, subject string) (uint64, error) {
	_, next, err := leaderGet(ctx, js, stream, map[string]any{"seq": seq, "next_by_subj": subject})
	if errors.Is(err, ErrUndecodableHeaders) {
		err = nil
	}
	return next, err
}

// ErrUndecodableHeaders is a stored message whose headers do not decode:
// nothing Switchback publishes. The sequence is still returned with it.
var ErrUndecodableHeaders = errors.New("the stored message's headers do not decode")

// leaderGet is JetStream's STREAM.MSG.GET: the stored message as the leader
// has it, headers decoded.
func leaderGet(ctx context.Context, js jetstream.JetStream, stream string, req map[string]any) (*nats.Msg, uint64, error) {
	prefix := topology.APIPrefix(js.Options().APIPrefix)
	body, _ := json.Marshal(req)
	reply, err := js.Conn().RequestWithContext(ctx, prefix+"STREAM.MSG.GET."+stream, body)
	if err != nil {
		return nil, 0, err
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
		return nil, 0, err
	}
	if resp.Error != nil {
		if resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound {
			return nil, 0, nil
		}
		return nil, 0, resp.Error
	}
	if resp.Message == nil {
		return nil, 0, nil
	}
	out := &nats.Msg{Subject: resp.Message.Subject, Data: resp.Message.Data, Header: nats.Header{}}
	if len(resp.Message.Hdrs) > 0 {
		h, err := nats.DecodeHeadersMsg(resp.Message.Hdrs)
		if err != nil {
			return nil, resp.Message.Seq, fmt.Errorf("%w: sequence %d: %v", ErrUndecodableHeaders, resp.Message.Seq, err)
		}
		out.Header = h
	}
	return out, resp.Message.Seq, nil
}

// Same reports whether a and b are the same message: subject, data and every
// header but JetStream's own (Nats-*, which the server and the publisher's
// options add or strip).
func Same(a, b *nats.Msg) bool {
	if a.Subject != b.Subject || !bytes.Equal(a.Data, b.Data) {
		return false
	}
	ha, hb := own(a.Header), own(b.Header)
	if len(ha) != len(hb) {
		return false
	}
	for k, va := range ha {
		vb, ok := hb[k]
		if !ok || len(va) != len(vb) {
			return false
		}
		for i := range va {
			if va[i] != vb[i] {
				return false
			}
		}
	}
	return true
}

// own is h without JetStream's headers, keyed case-insensitively.
func own(h nats.Header) map[string][]string {
	out := make(map[string][]string, len(h))
	for k, v := range h {
		lk := strings.ToLower(k)
		if strings.HasPrefix(lk, "nats-") {
			continue
		}
		out[lk] = v
	}
	return out
}
