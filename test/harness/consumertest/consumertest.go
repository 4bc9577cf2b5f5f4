// Package consumertest pulls from JetStream consumers in tests that want
// what one fetch brought as a slice, to count and index it.
package consumertest

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// Fetch pulls up to n messages from c, waiting up to wait for them, and
// returns those that came: none when none came in time.
func Fetch(t testing.TB, c jetstream.Consumer, n int, wait time.Duration) []jetstream.Msg {
	t.Helper()
	batch, err := c.Fetch(n, jetstream.FetchMaxWait(wait))
	require.NoError(t, err)
	var out []jetstream.Msg
	for m := range batch.Messages() {
		out = append(out, m)
	}
	return out
}
