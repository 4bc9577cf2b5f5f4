package eventstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/natsembed/natstest"
)

func TestCarriesOwnReservedAgreesWithOwnReservedHeaders(t *testing.T) {
	cases := []nats.Header{
		{},
		{"ce-type": {"x"}, "Nats-Sequence": {"1"}},
		{"Nats-Sequence": {"1", "2"}},
		{"nats-sequence": {"1"}, "Nats-Sequence": {"2"}},
		{"NATS-TIME-STAMP": {"a"}, "Nats-Time-Stamp": {"b"}},
		{"Nats-Msg-Id": {"a", "b"}, "Nats-Stream": {"S"}},
		{"Nats-Num-Pending": {"1"}, "Nats-Last-Sequence": {"1"}, "Nats-Subject": {"s"}, "Nats-Stream": {"S"}},
		{"Nats-Stream-Source": {"S 1 > >"}},
		{"nats-stream-source": {"S 1 > >"}, "Nats-Stream": {"S"}},
	}
	for _, h := range cases {
		for _, added := range []int{0, 1} {
			assert.Equal(t, len(ownReservedHeaders(h, added)) > 0, carriesOwnReserved(h, added), "%v added %d", h, added)
		}
	}
	// A direct get never serves the source header: one is always a copy's.
	assert.True(t, carriesOwnReserved(nats.Header{"Nats-Stream-Source": {"S 1 > >"}}, 1))
	assert.Equal(t, []string{"Nats-Stream-Source"}, ownReservedHeaders(nats.Header{"Nats-Stream-Source": {"S 1 > >"}, "Nats-Stream": {"S"}}, 1))
}

// TestOrderedReadRecovers follows a subject across pull requests that
// expire while nothing comes, and across the loss of its consumer.
func TestOrderedReadRecovers(t *testing.T) {
	old := pullExpires
	pullExpires = 50 * time.Millisecond
	t.Cleanup(func() { pullExpires = old })
	_, js := natstest.Connect(t, natstest.Start(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, js, Config{})
	require.NoError(t, err)
	agg := events.NodeAggregate(events.ManagerRef{Namespace: "ns", Name: "m", UID: "u"}, "n1")
	appendOne := func(v uint64, id string) uint64 {
		e := events.New(agg, events.SourceController, id, time.Now(), events.NodeResumed{Step: events.NodePending, Message: id})[0]
		v, err := s.Append(ctx, agg, v, e)
		require.NoError(t, err)
		return v
	}
	v := appendOne(0, "e1")

	var got []uint64
	var consumers []string
	appended := make(chan uint64, 1)
	var r *orderedRead
	r = &orderedRead{s: s, subjects: []string{agg.Subject()}, follow: true, next: 1,
		fn: func(seq, _ uint64, _ string, _ nats.Header, _ []byte, _ time.Time) (bool, error) {
			got = append(got, seq)
			consumers = append(consumers, r.consumer)
			switch len(got) {
			case 1:
				// Idle for many expiries, then one more event.
				go func() {
					time.Sleep(10 * pullExpires)
					appended <- appendOne(v, "e2")
				}()
			case 2:
				v = <-appended
				// The consumer goes (an operator, a restarted server): the
				// read goes on from the next sequence.
				require.NoError(t, s.stream.DeleteConsumer(ctx, r.consumer))
				go func() { appended <- appendOne(v, "e3") }()
			}
			return len(got) == 3, nil
		}}
	defer r.close()
	require.NoError(t, r.run(ctx))
	assert.Equal(t, []uint64{1, 2, 3}, got, "every event once, in order")
	assert.Equal(t, consumers[0], consumers[1], "expired requests are renewed on the same consumer")
	assert.NotEqual(t, consumers[1], consumers[2], "a lost consumer is re-created")
}

// TestNoRespondersIsWaitedOut: a pull answered "503 no responders" (a new
// consumer whose interest has not crossed the routes yet, or one lost with
// its server) re-creates the consumer where the read is, until the read
// has waited readPatience; a read that makes progress starts its patience
// again.
func TestNoRespondersIsWaitedOut(t *testing.T) {
	_, js := natstest.Connect(t, natstest.Start(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, js, Config{})
	require.NoError(t, err)
	r := &orderedRead{s: s, next: 1}
	defer r.close()
	_, err = r.reset(ctx)
	require.NoError(t, err)
	first := r.consumer
	noResponders := &nats.Msg{Header: nats.Header{hdrStatus: {"503"}}}

	_, err = r.status(ctx, noResponders)
	require.NoError(t, err, "waited out")
	assert.NotEqual(t, first, r.consumer, "the consumer is re-created")

	old := readPatience
	readPatience = 0
	t.Cleanup(func() { readPatience = old })
	_, err = r.status(ctx, noResponders)
	require.ErrorIs(t, err, nats.ErrNoResponders, "given up after readPatience")
	assert.Contains(t, err.Error(), "no answer for")
}

func TestTransient(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{nats.ErrNoResponders, true},
		{fmt.Errorf("%w: at 7", errBehind), true},
		{fmt.Errorf("stream info: %w", nats.ErrTimeout), true},
		{&jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}, true},
		{&jetstream.APIError{Code: 404, ErrorCode: jetstream.JSErrCodeStreamNotFound}, false},
		{jetstream.ErrStreamNotFound, false},
		{context.Canceled, false},
		{nats.ErrPermissionViolation, false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, transient(tt.err), "%v", tt.err)
	}
}

func TestPatienceGivesUpOnlyOnTransientErrorsAfterItsTime(t *testing.T) {
	ctx := context.Background()
	var p patience
	require.NoError(t, p.pause(ctx, nats.ErrNoResponders), "a first no-responders is waited out")
	assert.Equal(t, 20*time.Millisecond, p.wait)
	require.NoError(t, p.pause(ctx, nats.ErrNoResponders))
	assert.Equal(t, 40*time.Millisecond, p.wait, "pauses double")
	assert.Equal(t, jetstream.ErrStreamNotFound, p.pause(ctx, jetstream.ErrStreamNotFound), "a lasting error at once")
	p.since = time.Now().Add(-readPatience)
	require.ErrorIs(t, p.pause(ctx, nats.ErrNoResponders), nats.ErrNoResponders, "given up")
	p.reset()
	require.NoError(t, p.pause(ctx, nats.ErrNoResponders), "progress restores the patience")
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	p.wait = time.Hour
	require.ErrorIs(t, p.pause(cctx, nats.ErrNoResponders), nats.ErrNoResponders, "the context ends the wait")
}
