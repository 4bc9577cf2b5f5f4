package eventstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchback-dev/switchback/metrics"
)

// SeqRange is a run of consecutive stream sequences, First through Last.
type SeqRange struct {
	First, Last uint64
}

// String implements fmt.Stringer: "7" or "7-9".
func (r SeqRange) String() string {
	if r.First == r.Last {
		return strconv.FormatUint(r.First, 10)
	}
	return strconv.FormatUint(r.First, 10) + "-" + strconv.FormatUint(r.Last, 10)
}

// Gaps are the sequences missing from the event stream. The stream denies
// deletes and purges and has no age, count or size limit (Config.StreamConfig),
// so nothing Switchback or an operator does removes a message: a sequence
// below LastSeq that is not stored was acknowledged and then lost (a damaged
// or truncated store file that the server rebuilt around; JetStream shows it
// only as a deleted sequence and a WARN line).
type Gaps struct {
	// Stream is the stream checked.
	Stream string
	// LastSeq is the stream's last sequence when checked.
	LastSeq uint64
	// Missing lists the lost sequences, ascending, as runs.
	Missing []SeqRange
}

// Count is the number of lost sequences.
func (g Gaps) Count() uint64 {
	var n uint64
	for _, r := range g.Missing {
		n += r.Last - r.First + 1
	}
	return n
}

// String lists the lost sequences ("3, 7-9"), or "none".
func (g Gaps) String() string {
	if len(g.Missing) == 0 {
		return "none"
	}
	parts := make([]string, len(g.Missing))
	for i, r := range g.Missing {
		parts[i] = r.String()
	}
	return strings.Join(parts, ", ")
}

// Err is nil when nothing is missing, else an error naming the stream and
// the lost sequences.
func (g Gaps) Err() error {
	if len(g.Missing) == 0 {
		return nil
	}
	return &LostHistoryError{Gaps: g}
}

// LostHistoryError reports acknowledged events the stream no longer holds.
type LostHistoryError struct{ Gaps Gaps }

// Error implements error.
func (e *LostHistoryError) Error() string {
	return fmt.Sprintf("eventstore: stream %s lost %d acknowledged event(s), sequences %s (of 1-%d): history is incomplete, "+
		"states folded from it may be wrong", e.Gaps.Stream, e.Gaps.Count(), e.Gaps.String(), e.Gaps.LastSeq)
}

// Ranges turns ascending sequences into runs.
func Ranges(seqs []uint64) []SeqRange {
	var out []SeqRange
	for _, s := range seqs {
		if n := len(out); n > 0 && out[n-1].Last+1 == s {
			out[n-1].Last = s
			continue
		}
		out = append(out, SeqRange{First: s, Last: s})
	}
	return out
}

// CheckHistory asks the server which sequences of the event stream are gone
// (stream info with the deleted sequences listed) and sets
// metrics.StreamLostEvents. On this stream every one of them is lost history
// (see Gaps); call it at start-up, and treat a non-empty result as an
// incident: the folds still run on what is left, but what they show may be
// wrong (a lost completion makes an upgrade look active again).
func (s *Store) CheckHistory(ctx context.Context) (Gaps, error) {
	info, err := s.stream.Info(ctx, jetstream.WithDeletedDetails(true))
	if err != nil {
		return Gaps{}, fmt.Errorf("eventstore: check history of stream %s: %w", s.cfg.Stream, err)
	}
	st := info.State
	g := Gaps{Stream: s.cfg.Stream, LastSeq: st.LastSeq}
	// Purges are denied, so the first sequence stays 1: a later one means
	// the head of the history is gone (a lost first block).
	if st.LastSeq > 0 && st.FirstSeq > 1 {
		g.Missing = append(g.Missing, SeqRange{First: 1, Last: min(st.FirstSeq-1, st.LastSeq)})
	}
	deleted := slices.Clone(st.Deleted)
	slices.Sort(deleted)
	deleted = slices.Compact(deleted)
	if len(deleted) < st.NumDeleted {
		return Gaps{}, fmt.Errorf("eventstore: check history of stream %s: %d deleted sequence(s) reported, %d listed", s.cfg.Stream, st.NumDeleted, len(deleted))
	}
	// An empty stream reports sequence 0 as deleted (first and last are 0):
	// only sequences the stream has handed out can be lost.
	deleted = slices.DeleteFunc(deleted, func(seq uint64) bool { return seq == 0 || seq > st.LastSeq })
	for _, r := range Ranges(deleted) {
		if n := len(g.Missing); n > 0 && g.Missing[n-1].Last+1 >= r.First {
			g.Missing[n-1].Last = max(g.Missing[n-1].Last, r.Last)
			continue
		}
		g.Missing = append(g.Missing, r)
	}
	metrics.StreamLostEvents.WithLabelValues(s.cfg.Stream).Set(float64(g.Count()))
	return g, nil
}
