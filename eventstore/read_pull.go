package eventstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchback-dev/switchback/topology"
)

// Pulls of an ordered read: pullInFlight requests of pullBatch messages in
// flight, each held by the server for at most pullExpires (a variable for
// tests). A request is sent as the reader takes messages, not as they
// arrive, so the reader's decoding must not leave the server idle: with two
// a replay ran at 0.80 of a raw read, with eight at 0.84
// (BenchmarkReplay1M), for at most 4,096 messages (a few MiB) waiting.
const (
	pullBatch    = 512
	pullInFlight = 8
)

var pullExpires = 5 * time.Second

// orderedRead is what the nats.go ordered consumer does (an ephemeral
// consumer without acks, re-created after any gap in its delivery
// sequence), with pull requests of its own on a raw inbox: a delivered
// message is whatever carries an ack reply subject, so a stored message
// that looks like a status (empty body, Status header) is delivered like any
// other, rather than dropped, which makes the nats.go ordered consumer
// re-create itself at that message forever.
type orderedRead struct {
	s        *Store
	subjects []string
	follow   bool // at the end, wait for more rather than return
	fn       func(seq, pending uint64, subject string, h nats.Header, data []byte, ts time.Time) (stop bool, err error)
	// until, when not 0, is the stream's last sequence as its leader had
	// it: a read whose consumer has nothing left before it asks the leader
	// whether that is so (see ended).
	until uint64

	sub         *rawInbox
	consumer    string
	pullSubject string // the consumer's next-messages request subject
	next        uint64 // the next stream sequence wanted
	deliverSeq  uint64 // last consumer sequence seen
	outstanding int    // messages asked for and not yet delivered or expired
	patience    patience
}

// orderedRead delivers to fn, from sequence from, every stored message on
// the subjects, in order, until fn stops it or, unless follow, none is left
// up to sequence until (0: none is left on the consumer, pending 0).
// pending is how many more the consumer had to deliver.
func (s *Store) orderedRead(ctx context.Context, subjects []string, from, until uint64, follow bool,
	fn func(seq, pending uint64, subject string, h nats.Header, data []byte, ts time.Time) (stop bool, err error)) error {
	r := &orderedRead{s: s, subjects: subjects, follow: follow, until: until, fn: fn, next: max(from, 1)}
	defer r.close()
	return r.run(ctx)
}

func (r *orderedRead) fail(err error) error {
	return fmt.Errorf("eventstore: read %s from seq %d: %w", r.s.cfg.Stream, r.next, err)
}

// close unsubscribes and deletes the consumer, which the server would
// otherwise keep until its inactivity threshold.
func (r *orderedRead) close() {
	if r.sub != nil {
		r.sub.close()
		r.sub = nil
	}
	r.dropConsumer()
}

func (r *orderedRead) dropConsumer() {
	if r.consumer == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = r.s.stream.DeleteConsumer(ctx, r.consumer)
	r.consumer = ""
}

// reset (re)creates the consumer at r.next, with an inbox of its own (what
// was sent for the previous one, a "409 Consumer Deleted" included, is not
// for it); done is true when it has nothing to deliver.
func (r *orderedRead) reset(ctx context.Context) (done bool, err error) {
	r.close()
	if r.sub, err = subscribeRaw(r.s.js.Conn(), pullInFlight*pullBatch+64); err != nil {
		return false, r.fail(err)
	}
	cfg := jetstream.ConsumerConfig{
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       r.next,
		AckPolicy:         jetstream.AckNonePolicy,
		InactiveThreshold: 5 * time.Minute,
		Replicas:          1,
		MemoryStorage:     true,
	}
	switch len(r.subjects) {
	case 0:
	case 1:
		cfg.FilterSubject = r.subjects[0]
	default:
		cfg.FilterSubjects = r.subjects
	}
	cons, err := r.s.stream.CreateConsumer(ctx, cfg)
	for err != nil {
		if err = r.patience.pause(ctx, err); err != nil {
			return false, r.fail(err)
		}
		cons, err = r.s.stream.CreateConsumer(ctx, cfg)
	}
	info := cons.CachedInfo()
	r.consumer, r.deliverSeq, r.outstanding = info.Name, 0, 0
	r.pullSubject = r.s.apiPrefix() + "CONSUMER.MSG.NEXT." + r.s.cfg.Stream + "." + r.consumer
	return info.NumPending == 0, nil
}

// pull asks for more messages while fewer than pullInFlight batches are
// outstanding.
func (r *orderedRead) pull() error {
	if r.outstanding+pullBatch > pullInFlight*pullBatch {
		return nil // called for every message: most find nothing to ask
	}
	nc := r.s.js.Conn()
	body := []byte(`{"batch":` + strconv.Itoa(pullBatch) + `,"expires":` + strconv.FormatInt(int64(pullExpires), 10) + `}`)
	for r.outstanding+pullBatch <= pullInFlight*pullBatch {
		if err := nc.PublishRequest(r.pullSubject, r.sub.subject, body); err != nil {
			return r.fail(err)
		}
		r.outstanding += pullBatch
	}
	return nil
}

func (r *orderedRead) run(ctx context.Context) error {
	done, err := r.reset(ctx)
	for {
		switch {
		case err != nil:
			return err
		case done && !r.follow:
			end, endErr := r.ended(ctx)
			if endErr != nil || end {
				return endErr
			}
			done, err = r.reset(ctx)
			continue
		}
		if err := r.pull(); err != nil {
			return err
		}
		m, nextErr := r.sub.nextWithin(ctx, pullExpires+fetchGrace)
		switch {
		case ctx.Err() != nil:
			return r.fail(ctx.Err())
		case nextErr != nil:
			// Requests lost (a reconnect, a consumer lost with its
			// server): start again where the read is.
			done, err = r.reset(ctx)
			continue
		}
		if !strings.HasPrefix(m.Reply, topology.AckPrefix) {
			done, err = r.status(ctx, m)
			continue
		}
		md, mdErr := deliveryOf(m)
		if mdErr != nil {
			return r.fail(fmt.Errorf("delivered message: %w", mdErr))
		}
		r.outstanding--
		if md.consumer != r.deliverSeq+1 {
			// A message was lost on the way (slow consumer, reconnect):
			// re-create the consumer at the first one missing.
			done, err = r.reset(ctx)
			continue
		}
		r.deliverSeq = md.consumer
		r.next = md.stream + 1
		r.patience.reset()
		stop, fnErr := r.fn(md.stream, md.pending, m.Subject, m.Header, m.Data, md.at)
		if fnErr != nil || stop {
			return fnErr
		}
		done = md.pending == 0
	}
}

// ended reports whether a read whose consumer has nothing left to deliver
// is over. The consumer runs on one server of the stream's, which may lag
// its leader (a server just restarted catches up for seconds, and a
// consumer placed there has nothing to deliver meanwhile), so a bounded
// read asks the leader for the next message on its subjects: one at or
// before until means the consumer's server is behind, and the read waits
// and starts again where it is, for as long as a read waits for a
// cluster.
func (r *orderedRead) ended(ctx context.Context) (bool, error) {
	if r.until == 0 || r.next > r.until {
		return true, nil
	}
	for _, f := range filtersOf(r.subjects) {
		if ended, err := r.s.endsBefore(ctx, &r.patience, f, r.next, r.until); err != nil || !ended {
			if err != nil {
				err = r.fail(err)
			}
			return false, err
		}
	}
	return true, nil
}

// status handles a status answering a pull request.
func (r *orderedRead) status(ctx context.Context, m *nats.Msg) (done bool, err error) {
	status, descr := m.Header.Get(hdrStatus), m.Header.Get(hdrDescription)
	switch status {
	case "100":
		return false, nil
	case "404", "408":
		// The request ended (expired) with this many messages undelivered.
		if n, err := strconv.Atoi(m.Header.Get("Nats-Pending-Messages")); err == nil {
			r.outstanding = max(r.outstanding-n, 0)
		} else {
			r.outstanding = max(r.outstanding-pullBatch, 0)
		}
		return false, nil
	case "409":
		if strings.Contains(strings.ToLower(descr), "consumer deleted") {
			return r.reset(ctx)
		}
		// Leadership change, max waiting exceeded...: ask again.
		r.outstanding = 0
		return false, nil
	case "503":
		// Nobody serves the consumer yet (its interest has not reached
		// this server) or any more (its server is gone): once the cluster
		// answers again, start again where the read is.
		if err := r.patience.pause(ctx, nats.ErrNoResponders); err != nil {
			return false, r.fail(err)
		}
		return r.reset(ctx)
	}
	return false, r.fail(fmt.Errorf("pull request answered status %s %q", status, descr))
}
