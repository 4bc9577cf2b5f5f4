// Package proctest is what the tests that run switchback as a process of
// its own share: a free loopback address for it to listen on, and stopping
// it the way Kubernetes does.
package proctest

import (
	"net"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/switchback-dev/switchback/natsembed"
)

// FreeAddr is a loopback address ("127.0.0.1:port") nothing listens on
// now, for a process the test starts to listen on.
func FreeAddr(t testing.TB) string {
	t.Helper()
	port, err := natsembed.FreePort("127.0.0.1")
	require.NoError(t, err)
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// Stop asks p to end with SIGTERM, as Kubernetes does, and waits until
// exited (closed or sent to once p's Wait returned) says it has; after 15 s
// it kills p and waits on.
func Stop[T any](p *os.Process, exited <-chan T) {
	_ = p.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		_ = p.Kill()
		<-exited
	}
}
