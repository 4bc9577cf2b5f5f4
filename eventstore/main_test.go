package eventstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/natsembed/natstest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newStore opens a store with the default configuration on a fresh
// embedded server, and returns it with the server's JetStream.
func newStore(t *testing.T) (*eventstore.Store, jetstream.JetStream) {
	t.Helper()
	_, js := natstest.Connect(t, natstest.Start(t))
	return openStore(t, js, eventstore.Config{}), js
}

// newR3Store opens a store of three replicas on a fresh cluster of three
// embedded servers, and returns it with the cluster's JetStream. It skips
// the test in -short mode.
func newR3Store(t *testing.T) (*eventstore.Store, jetstream.JetStream) {
	t.Helper()
	if testing.Short() {
		t.Skip("cluster test in -short mode")
	}
	_, js := natstest.Connect(t, natstest.StartCluster(t, 3))
	// StartCluster returns once the meta leader knows every peer, so the
	// R3 stream places at once.
	return openStore(t, js, eventstore.Config{Replicas: 3}), js
}

// appendNumbered appends to agg, one at a time from version v, the events
// e<from> up to e<to-1> (resumed, that name as their message), and returns
// agg's version after them.
func appendNumbered(t *testing.T, c context.Context, s *eventstore.Store, agg events.AggregateID, v uint64, from, to int) uint64 {
	t.Helper()
	for i := from; i < to; i++ {
		v = appendResumed(t, c, s, agg, v, fmt.Sprintf("e%d", i))
	}
	return v
}

// appendResumed appends to agg, at version v, one event (resumed, msg as
// its message), and returns agg's version after it.
func appendResumed(t *testing.T, c context.Context, s *eventstore.Store, agg events.AggregateID, v uint64, msg string) uint64 {
	t.Helper()
	v, err := s.Append(c, agg, v, resumed(agg, msg))
	require.NoError(t, err)
	return v
}
