package eventstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/events"
)

// A message delivered and never acknowledged (its reader lost the
// connection, or died) comes again at once after a rewind, not after the
// consumer's AckWait; a Rewinder rewinds at its first check and after a
// reconnect only.
func TestRewindRedeliversAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		r3   bool
	}{{"R1", false}, {"R3", true}} {
		t.Run(tc.name, func(t *testing.T) {
			s, js := newStore(t)
			if tc.r3 {
				s, js = newR3Store(t)
			}
			c := ctx(t)
			agg := events.NodeAggregate(mgr, "n1")
			v := appendNumbered(t, c, s, agg, 0, 0, 3)
			require.Equal(t, uint64(3), v)
			_, err := js.CreateOrUpdateConsumer(c, s.Stream(), jetstream.ConsumerConfig{
				Durable: "d", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Hour, DeliverPolicy: jetstream.DeliverAllPolicy,
			})
			require.NoError(t, err)

			first, err := s.Fetch(c, "d", 2, time.Second)
			require.NoError(t, err)
			require.Len(t, first, 2)
			require.NoError(t, first[1].Ack(), "acked past the floor: comes again too")
			rest, err := s.Fetch(c, "d", 10, 0)
			require.NoError(t, err)
			require.Len(t, rest, 1, "the third; the first is still pending, for an hour")
			none, err := s.Fetch(c, "d", 10, 0)
			require.NoError(t, err)
			require.Empty(t, none, "nothing comes before AckWait")

			r := s.Rewinder("d")
			did, err := r.Check(c)
			require.NoError(t, err)
			assert.True(t, did, "the first check rewinds")
			again, err := s.Fetch(c, "d", 10, 5*time.Second)
			require.NoError(t, err)
			require.Len(t, again, 3, "every message after the ack floor, at once")
			for i, m := range again {
				md, err := m.Metadata()
				require.NoError(t, err)
				assert.Equal(t, uint64(i+1), md.Sequence.Stream, "in stream order")
				require.NoError(t, m.Ack())
			}

			did, err = r.Check(c)
			require.NoError(t, err)
			assert.False(t, did, "no reconnect, no rewind")

			require.NoError(t, js.Conn().ForceReconnect())
			require.Eventually(t, func() bool { return js.Conn().Stats().Reconnects > 0 && js.Conn().IsConnected() }, 10*time.Second, 10*time.Millisecond)
			did, err = r.Check(c)
			require.NoError(t, err)
			assert.True(t, did, "a reconnect rewinds")
			none, err = s.Fetch(c, "d", 10, 0)
			require.NoError(t, err)
			assert.Empty(t, none, "all acknowledged: a rewind to the floor brings nothing")

			short, cancel := context.WithTimeout(c, time.Second)
			defer cancel()
			_, err = s.Rewinder("missing").Check(short)
			require.Error(t, err, "a consumer that does not exist: nobody answers")
			assert.Contains(t, err.Error(), "missing")
		})
	}
}
