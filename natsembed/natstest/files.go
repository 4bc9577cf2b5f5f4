package natstest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/switchback-dev/switchback/natsembed"
)

// AuthFile is the file FileServers' configurations include: the
// authorization a test writes and rewrites (FileServers.WriteAuth).
const AuthFile = "auth.conf"

// FileServers are nats-servers that read their configuration from files,
// as deployed servers do: a main file per server (loopback, JetStream, the
// routes of a cluster) that includes AuthFile from the same directory, so
// that Reload reads both again as `nats-server --signal reload` does.
type FileServers struct {
	// Dir holds the files and the stores.
	Dir string
	// Servers are the running servers, in start order.
	Servers []*natsembed.Server

	urls  []string
	mu    sync.Mutex
	conns []*nats.Conn
}

// StartFromFiles starts n servers (a cluster with a JetStream meta leader
// when n > 1) whose configuration includes auth, under t.TempDir(); they
// stop when the test ends, their clients first.
func StartFromFiles(t testing.TB, n int, auth string) *FileServers {
	t.Helper()
	fs := &FileServers{Dir: t.TempDir()}
	fs.WriteAuth(t, auth)
	ports := make([]int, n)
	for i := range ports {
		p, err := natsembed.FreePort("127.0.0.1")
		if err != nil {
			t.Fatalf("natstest: %v", err)
		}
		ports[i] = p
	}
	t.Cleanup(fs.closeConns)
	for i := range n {
		var b strings.Builder
		fmt.Fprintf(&b, "server_name: files-%d\nlisten: \"127.0.0.1:-1\"\njetstream { store_dir: %q }\n", i, filepath.Join(fs.Dir, fmt.Sprint("store-", i)))
		if n > 1 {
			var routes []string
			for j, p := range ports {
				if j != i {
					routes = append(routes, fmt.Sprintf("\"nats-route://127.0.0.1:%d\"", p))
				}
			}
			fmt.Fprintf(&b, "cluster { name: files, listen: \"127.0.0.1:%d\", no_advertise: true, routes: [%s] }\n", ports[i], strings.Join(routes, ", "))
		}
		fmt.Fprintf(&b, "include %s\n", AuthFile)
		path := filepath.Join(fs.Dir, fmt.Sprintf("nats-%d.conf", i))
		if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
			t.Fatalf("natstest: %v", err)
		}
		opts, err := server.ProcessConfigFile(path)
		if err != nil {
			t.Fatalf("natstest: %s: %v", path, err)
		}
		opts.NoSigs, opts.NoLog = true, true
		ns, err := server.NewServer(opts)
		if err != nil {
			t.Fatalf("natstest: server %d: %v", i, err)
		}
		ns.Start()
		srv := &natsembed.Server{Server: ns}
		t.Cleanup(srv.Shutdown)
		if !ns.ReadyForConnections(10 * time.Second) {
			t.Fatalf("natstest: server %d not ready", i)
		}
		fs.Servers = append(fs.Servers, srv)
		fs.urls = append(fs.urls, ns.ClientURL())
	}
	if n > 1 {
		deadline := time.Now().Add(30 * time.Second)
		for !fs.hasMetaLeader() {
			if time.Now().After(deadline) {
				t.Fatal("natstest: no JetStream meta leader within 30s")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return fs
}

func (fs *FileServers) hasMetaLeader() bool {
	for _, s := range fs.Servers {
		if s.JetStreamIsLeader() {
			return true
		}
	}
	return false
}

// WriteAuth replaces the included authorization, as applying a regenerated
// Secret does on the servers' volume; Reload makes the servers read it.
func (fs *FileServers) WriteAuth(t testing.TB, auth string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(fs.Dir, AuthFile), []byte(auth), 0o600); err != nil {
		t.Fatalf("natstest: %v", err)
	}
}

// Reload has every server read its files again.
func (fs *FileServers) Reload(t testing.TB) {
	t.Helper()
	for i, s := range fs.Servers {
		if err := s.Reload(); err != nil {
			t.Fatalf("natstest: reload server %d: %v", i, err)
		}
	}
}

// Connect opens a client connection to all the servers; it is closed
// before the servers stop.
func (fs *FileServers) Connect(opts ...nats.Option) (*nats.Conn, error) {
	nc, err := nats.Connect(strings.Join(fs.urls, ","), opts...)
	if err != nil {
		return nil, fmt.Errorf("natstest: connect: %w", err)
	}
	fs.mu.Lock()
	fs.conns = append(fs.conns, nc)
	fs.mu.Unlock()
	return nc, nil
}

func (fs *FileServers) closeConns() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for _, nc := range fs.conns {
		nc.Close()
	}
}
