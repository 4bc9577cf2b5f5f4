package nodequeue_test

import (
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/nodequeue"
	"github.com/switchback-dev/switchback/topology"
)

// TestStreamLimits: both streams are bounded per message and in total, and a
// message over the bound is refused, not stored.
func TestStreamLimits(t *testing.T) {
	_, js, ctx := open(t, nodequeue.Config{})
	for _, tc := range []struct {
		stream, subject string
		msgBytes        int32
		streamBytes     int64
	}{
		{topology.CommandStream, topology.CommandSubject("n1"), topology.MaxCommandBytes, topology.MaxCommandStreamBytes},
		{topology.DeadLetterStream, "sb.dlq.cmd.n1", topology.MaxDeadLetterBytes, topology.MaxDeadLetterStreamBytes},
	} {
		t.Run(tc.stream, func(t *testing.T) {
			s, err := js.Stream(ctx, tc.stream)
			require.NoError(t, err)
			cfg := s.CachedInfo().Config
			assert.Equal(t, tc.msgBytes, cfg.MaxMsgSize)
			assert.Equal(t, tc.streamBytes, cfg.MaxBytes)
			assert.Equal(t, jetstream.DiscardOld, cfg.Discard, "the oldest go first")

			_, err = js.PublishMsg(ctx, &nats.Msg{Subject: tc.subject, Data: make([]byte, tc.msgBytes+1)})
			var apiErr *jetstream.APIError
			require.ErrorAs(t, err, &apiErr)
			assert.Equal(t, jetstream.JSErrCodeStreamMessageExceedsMaximum, apiErr.ErrorCode)
		})
	}
}
