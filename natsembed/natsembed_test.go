package natsembed_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/switchback-dev/switchback/natsembed"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStartConnectShutdown(t *testing.T) {
	cases := []struct {
		name string
		opts natsembed.Options
	}{
		{"loopback random port", natsembed.Options{}},
		{"in-process only", natsembed.Options{InProcessOnly: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.StoreDir = t.TempDir()
			s, err := natsembed.Start(tc.opts)
			require.NoError(t, err)
			if tc.opts.InProcessOnly {
				assert.Empty(t, s.URL())
			} else {
				assert.Regexp(t, `^nats://127\.0\.0\.1:\d+$`, s.URL())
			}
			nc, err := s.Connect()
			require.NoError(t, err)
			js, err := jetstream.New(nc)
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}})
			require.NoError(t, err)
			_, err = js.Publish(ctx, "t.1", []byte("x"))
			require.NoError(t, err)
			s.Shutdown()
			assert.True(t, nc.IsClosed(), "clients are closed before the server stops")
			s.Shutdown() // idempotent
		})
	}
}

func TestStartRequiresStoreDir(t *testing.T) {
	_, err := natsembed.Start(natsembed.Options{})
	assert.ErrorContains(t, err, "StoreDir")
}

func TestClusterSurvivesLosingOneServer(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test in -short mode")
	}
	c, err := natsembed.StartCluster("t", 3, t.TempDir())
	require.NoError(t, err)
	defer c.Shutdown()
	nc, err := c.Connect(nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	require.NoError(t, err)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.Eventually(t, func() bool {
		_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "R3", Subjects: []string{"r3.>"}, Replicas: 3})
		return err == nil
	}, 30*time.Second, 100*time.Millisecond)
	_, err = js.Publish(ctx, "r3.a", []byte("1"))
	require.NoError(t, err)

	c.Stop(1)
	require.Eventually(t, func() bool {
		_, err := js.Publish(ctx, "r3.a", []byte("2"))
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "R3 keeps accepting writes with 2 of 3 servers")
	require.NoError(t, c.Restart(1))
	require.Eventually(t, func() bool {
		st, err := js.Stream(ctx, "R3")
		if err != nil {
			return false
		}
		info, err := st.Info(ctx)
		if err != nil || info.Cluster == nil {
			return false
		}
		current := 0
		for _, r := range info.Cluster.Replicas {
			if r.Current {
				current++
			}
		}
		return info.State.Msgs == 2 && current == 2
	}, 30*time.Second, 100*time.Millisecond, "the restarted server catches up")
}
