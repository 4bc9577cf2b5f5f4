package callout

import (
	"log/slog"
	"os"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/switchback-dev/switchback/natsauth"
)

// DefaultTokenPath is where the worker's projected token is mounted
// (a projected volume at /var/run/secrets/switchback/nats, path "token").
const DefaultTokenPath = "/var/run/secrets/switchback/nats/token"

// TokenFile returns a nats.Option that presents the token in path on every
// connect and reconnect. The kubelet rewrites a projected token before it
// expires, so the file is read each time, never once at start. A file that
// cannot be read is logged and no token is sent: the callout refuses the
// connection and the client retries with whatever the file holds next.
func TokenFile(path string, log *slog.Logger) nats.Option {
	if log == nil {
		log = slog.Default()
	}
	return nats.TokenHandler(func() string {
		b, err := os.ReadFile(path)
		if err != nil {
			log.Error("read the NATS token file", "path", path, "error", err)
			return ""
		}
		return strings.TrimSpace(string(b))
	})
}

// WorkerOptions are the connection options of node's worker in callout
// mode: its token file, its inbox prefix (the only place its user may
// subscribe: natsauth.WorkerOptions), and IgnoreAuthErrorAbort. nats.go
// otherwise stops reconnecting after the same authorization error twice,
// which is what a worker sees while the callout service is down or its
// user has just expired: it must keep trying until the callout is back.
func WorkerOptions(node, tokenPath string, log *slog.Logger) []nats.Option {
	return append([]nats.Option{TokenFile(tokenPath, log), nats.IgnoreAuthErrorAbort()}, natsauth.WorkerOptions(node)...)
}
