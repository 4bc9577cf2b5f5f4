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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Each call gets its own short deadline: while the cluster elects a new
	// leader a request can go unanswered, and one hung call must not use up
	// the whole wait. Msg-Ids make a retried publish count once.
	try := func(f func(context.Context) error) func() bool {
		return func() bool {
			c, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			return f(c) == nil
		}
	}
	publish := func(data string) func(context.Context) error {
		return func(c context.Context) error {
			_, err := js.Publish(c, "r3.a", []byte(data), jetstream.WithMsgID("msg-"+data))
			return err
		}
	}
	require.Eventually(t, try(func(c context.Context) error {
		_, err := js.CreateOrUpdateStream(c, jetstream.StreamConfig{Name: "R3", Subjects: []string{"r3.>"}, Replicas: 3})
		return err
	}), 60*time.Second, 100*time.Millisecond)
	require.Eventually(t, try(publish("1")), 60*time.Second, 100*time.Millisecond)

	c.Stop(1)
	require.Eventually(t, try(publish("2")), 60*time.Second, 100*time.Millisecond, "R3 keeps accepting writes with 2 of 3 servers")
	require.NoError(t, c.Restart(1))
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
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
	}, 60*time.Second, 100*time.Millisecond, "the restarted server catches up")
}
