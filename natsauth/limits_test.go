package natsauth_test

import (
	"fmt"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/natsauth"
	"github.com/switchback-dev/switchback/topology"
)

// TestAccountLimits: on a server running the generated configuration, the
// account's JetStream limits hold for every client: no fifth stream (even
// for the controller, which may create streams), no memory stream at all,
// and no consumer past the per-stream bound (the reader may create
// ephemeral consumers, so this is what bounds it).
func TestAccountLimits(t *testing.T) {
	apiCode := func(err error) jetstream.ErrorCode {
		var apiErr *jetstream.APIError
		require.ErrorAs(t, err, &apiErr)
		return apiErr.ErrorCode
	}
	t.Run("the default limits: Switchback's four streams, no more", func(t *testing.T) {
		d := newDeployment(t, natsauth.Config{Nodes: []string{"n1"}, Account: natsauth.DefaultAccount})
		_, err := d.js.CreateStream(d.ctx, jetstream.StreamConfig{Name: "EXTRA", Subjects: []string{"extra.>"}})
		assert.Equal(t, jetstream.ErrorCode(server.JSMaximumStreamsLimitErr), apiCode(err), "a fifth stream: %v", err)
		info, err := d.js.AccountInfo(d.ctx)
		require.NoError(t, err)
		assert.Equal(t, natsauth.DefaultLimits.MaxStreams, info.Limits.MaxStreams)
		assert.Equal(t, natsauth.DefaultLimits.MaxConsumers, info.Limits.MaxConsumers)
		assert.Equal(t, natsauth.DefaultLimits.MaxStore, info.Limits.MaxStore)
		assert.Zero(t, info.Limits.MaxMemory)
		assert.Equal(t, 4, info.Streams)
	})
	t.Run("no memory storage; consumers bounded per stream", func(t *testing.T) {
		const maxConsumers = 8
		d := newDeployment(t, natsauth.Config{Nodes: []string{"n1"}, Account: natsauth.DefaultAccount,
			Limits: natsauth.Limits{MaxStreams: 5, MaxConsumers: maxConsumers}})
		_, err := d.js.CreateStream(d.ctx, jetstream.StreamConfig{Name: "MEM", Subjects: []string{"mem.>"}, Storage: jetstream.MemoryStorage})
		assert.Equal(t, jetstream.ErrorCode(server.JSMemoryResourcesExceededErr), apiCode(err), "a memory stream: %v", err)
		_, err = d.js.CreateStream(d.ctx, jetstream.StreamConfig{Name: "FILE", Subjects: []string{"file.>"}})
		require.NoError(t, err, "a fifth stream within MaxStreams 5")

		r := d.connectReader()
		var created int
		for i := range maxConsumers + 1 {
			_, err = r.js.CreateConsumer(d.ctx, topology.EventStream, jetstream.ConsumerConfig{
				Name: fmt.Sprintf("reader-%d", i), AckPolicy: jetstream.AckNonePolicy, MemoryStorage: true})
			if err != nil {
				break
			}
			created++
		}
		assert.Equal(t, jetstream.JSErrCodeMaximumConsumersLimit, apiCode(err), "the reader's consumer past the bound: %v", err)
		assert.Equal(t, maxConsumers, created, "the reader created consumers up to the bound (the stream had none)")
		assert.Empty(t, r.viol.All())
	})
	t.Run("limits that cannot fit Switchback are refused", func(t *testing.T) {
		for name, l := range map[string]natsauth.Limits{
			"three streams":         {MaxStreams: 3},
			"two consumers":         {MaxConsumers: 2},
			"less than the reserve": {MaxStore: 1 << 30},
		} {
			_, err := natsauth.Generate(natsauth.Config{Nodes: []string{"n1"}, Account: natsauth.DefaultAccount, Limits: l})
			assert.Error(t, err, name)
		}
		_, err := natsauth.Generate(natsauth.Config{Nodes: []string{"n1"}, Limits: natsauth.Limits{MaxStreams: 5}})
		assert.ErrorContains(t, err, "need an account")
	})
}
