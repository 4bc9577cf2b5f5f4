// Package natstest starts embedded NATS servers for tests: random port, a
// temporary store dir, and a clean shutdown (clients first) at test end.
package natstest

import (
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchback-dev/switchback/natsembed"
)

// Start starts a server on a random loopback port with a store under
// t.TempDir(); it is shut down when the test ends.
func Start(t testing.TB) *natsembed.Server {
	t.Helper()
	return StartAt(t, t.TempDir())
}

// StartAt starts a server on storeDir, so a test can restart on the same store.
func StartAt(t testing.TB, storeDir string) *natsembed.Server {
	t.Helper()
	s, err := natsembed.Start(natsembed.Options{StoreDir: storeDir})
	if err != nil {
		t.Fatalf("start embedded NATS: %v", err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// Connect returns a connection and a JetStream context on s.
func Connect(t testing.TB, s interface {
	Connect(...nats.Option) (*nats.Conn, error)
}) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := s.Connect()
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return nc, js
}

// StartCluster starts an n-server JetStream cluster under t.TempDir().
func StartCluster(t testing.TB, n int) *natsembed.Cluster {
	t.Helper()
	c, err := natsembed.StartCluster("sbtest", n, t.TempDir())
	if err != nil {
		t.Fatalf("start embedded cluster: %v", err)
	}
	t.Cleanup(c.Shutdown)
	return c
}
