package eventstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/switchback-dev/switchback/dedup"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/events/fastcodec"
)

// A store opened with Config.DirectScans scans by direct batch gets: no
// consumer, nothing created on the server, so a reader whose account
// imports only JetStream's read calls (natsauth's reader account) can scan.
// Each subject filter is read by a cursor of its own, in batches, and the
// cursors are merged in stream order.

// cursor reads one subject filter of a direct scan.
type cursor struct {
	filter string
	next   uint64 // the first sequence not read yet
	buf    []directMsg
	done   bool
}

// directScan hands visit every message on subjects (empty: all) from
// sequence from up to until, in stream order and each once, until visit
// stops it. A replica that answers a direct get may lag the stream's
// leader, so a cursor that finds nothing more before until asks the leader
// (dedup.GetNext) and reads again while it has something.
func (s *Store) directScan(ctx context.Context, subjects []string, from, until uint64, visit func(directMsg) (stop bool, err error)) error {
	filters := filtersOf(subjects)
	cursors := make([]*cursor, len(filters))
	for i, f := range filters {
		cursors[i] = &cursor{filter: f, next: from}
	}
	var emitted uint64
	for {
		var head *cursor
		for _, c := range cursors {
			if err := s.fill(ctx, c, until); err != nil {
				return fmt.Errorf("eventstore: scan %s on %s from seq %d: %w", s.cfg.Stream, c.filter, c.next, err)
			}
			if !c.done && (head == nil || c.buf[0].seq < head.buf[0].seq) {
				head = c
			}
		}
		if head == nil {
			return nil
		}
		m := head.buf[0]
		head.buf = head.buf[1:]
		if m.seq <= emitted {
			continue // matched by an earlier filter too
		}
		emitted = m.seq
		if stop, err := visit(m); err != nil || stop {
			return err
		}
	}
}

// fill reads c's next batch when it has none buffered, and marks it done
// when nothing is left up to until.
func (s *Store) fill(ctx context.Context, c *cursor, until uint64) error {
	var p patience
	for !c.done && len(c.buf) == 0 {
		if c.next > until {
			c.done = true
			return nil
		}
		n, _, err := s.directBatch(ctx, c.filter, c.next, s.cfg.LoadBatch, func(m directMsg) error {
			if m.seq <= until {
				c.buf = append(c.buf, m)
			}
			c.next = m.seq + 1
			return nil
		})
		switch {
		case err != nil:
			if err = p.pause(ctx, err); err != nil {
				return err
			}
			continue
		case n > 0 && len(c.buf) == 0:
			c.done = true // the batch went past until
			return nil
		case n > 0:
			return nil
		}
		// Nothing from c.next on, says the replica that answered.
		ended, err := s.endsBefore(ctx, &p, c.filter, c.next, until)
		if err != nil {
			return err
		}
		c.done = ended
	}
	return nil
}

// filtersOf are a read's subject filters: subjects, or every subject.
func filtersOf(subjects []string) []string {
	if len(subjects) == 0 {
		return []string{">"}
	}
	return subjects
}

// endsBefore asks the stream leader (dedup.GetNext) whether nothing on
// filter lies from sequence from up to until, which a replica serving a
// read said: a replica may lag the leader (a server just restarted
// catches up for seconds). When the leader has something, the replica is
// behind: endsBefore waits (p, as for a cluster with nobody to answer)
// and reports false, and the caller reads again from where it is.
func (s *Store) endsBefore(ctx context.Context, p *patience, filter string, from, until uint64) (bool, error) {
	seq, err := dedup.GetNext(ctx, s.js, s.cfg.Stream, from, filter)
	for err != nil {
		if err = p.pause(ctx, err); err != nil {
			return false, fmt.Errorf("ask the stream leader what follows: %w", err)
		}
		seq, err = dedup.GetNext(ctx, s.js, s.cfg.Stream, from, filter)
	}
	if seq == 0 || seq > until {
		return true, nil
	}
	behind := fmt.Errorf("%w: the server serving the read has nothing on %s from sequence %d, the stream leader has %d", errBehind, filter, from, seq)
	return false, p.pause(ctx, behind)
}

// decodeServed decodes, with d, a message served by a direct get (the
// server adds its own headers once), the form a DecodeError takes for one
// to park.
func decodeServed(d *fastcodec.Decoder, m directMsg) (events.Envelope, error) {
	if carriesOwnReserved(m.header, 1) {
		return events.Envelope{}, reservedHeaderError(m.subject, m.seq, m.header, ownReservedHeaders(m.header, 1))
	}
	return d.Decode(m.subject, m.header, m.data, m.seq, nil)
}

// parkOr hands a decoded event to fn, a DecodeError to onParked (if non-nil).
func parkOr(env events.Envelope, err error, fn func(events.Envelope) error, onParked func(*events.DecodeError)) error {
	if err == nil {
		return fn(env)
	}
	var de *events.DecodeError
	if !errors.As(err, &de) {
		return err
	}
	if onParked != nil {
		onParked(de)
	}
	return nil
}
