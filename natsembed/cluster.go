package natsembed

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"
)

// Cluster is a JetStream cluster of embedded servers on loopback, for tests of
// replicated (R3) streams and of losing a server mid-upgrade.
type Cluster struct {
	Name    string
	Servers []*Server // nil entries are stopped servers
	opts    []Options
}

// StartCluster starts n servers that route to each other, with stores under
// dir, and waits until JetStream has a meta leader that knows every peer.
//
// Each option adjusts every server's options (e.g. NoAdvertise).
//
// Route ports are chosen free before the servers start, so another socket
// (any outgoing connection takes an ephemeral port from the same range) may
// take one in between and that server cannot listen. A fresh cluster is then
// started again on new ports, up to three times.
func StartCluster(name string, n int, dir string, opts ...ClusterOption) (*Cluster, error) {
	if n < 1 {
		return nil, errors.New("natsembed: cluster needs at least one server")
	}
	var errs []error
	for range 3 {
		c, err := startCluster(name, n, dir, opts)
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		for i := range n {
			if rerr := os.RemoveAll(filepath.Join(dir, fmt.Sprintf("s%d", i))); rerr != nil {
				return nil, errors.Join(append(errs, rerr)...)
			}
		}
	}
	return nil, errors.Join(errs...)
}

// ClusterOption adjusts the options of every server of a cluster.
type ClusterOption func(*Options)

// NoAdvertise keeps the cluster's servers from advertising each other's
// client URLs, so that clients given one proxy per server never bypass the
// proxies (a test partitioning a client from the cluster).
func NoAdvertise(o *Options) { o.Cluster.NoAdvertise = true }

func startCluster(name string, n int, dir string, opts []ClusterOption) (*Cluster, error) {
	c := &Cluster{Name: name, Servers: make([]*Server, n), opts: make([]Options, n)}
	routePorts := make([]int, n)
	for i := range routePorts {
		p, err := FreePort("127.0.0.1")
		if err != nil {
			return nil, err
		}
		routePorts[i] = p
	}
	for i := range n {
		var routes []string
		for j, p := range routePorts {
			if j != i {
				routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
			}
		}
		c.opts[i] = Options{
			Name:     fmt.Sprintf("%s-%d", name, i),
			StoreDir: filepath.Join(dir, fmt.Sprintf("s%d", i)),
			Cluster:  &ClusterOptions{Name: name, Port: routePorts[i], Routes: routes},
		}
		for _, o := range opts {
			o(&c.opts[i])
		}
	}
	for i := range n {
		if err := c.Restart(i); err != nil {
			c.Shutdown()
			return nil, err
		}
	}
	if err := c.WaitForMetaLeader(30 * time.Second); err != nil {
		c.Shutdown()
		return nil, err
	}
	return c, nil
}

// Restart starts server i again with its store dir and ports (a stopped server
// comes back with the same identity, as after a pod restart).
func (c *Cluster) Restart(i int) error {
	if c.Servers[i] != nil {
		return fmt.Errorf("natsembed: server %d is running", i)
	}
	s, err := Start(c.opts[i])
	if err != nil {
		return err
	}
	// Keep the client port stable across restarts so clients reconnect.
	if tcp, ok := s.Addr().(*net.TCPAddr); ok {
		c.opts[i].Port = tcp.Port
	}
	c.Servers[i] = s
	return nil
}

// Stop shuts server i down (its store is kept).
func (c *Cluster) Stop(i int) {
	if s := c.Servers[i]; s != nil {
		s.Shutdown()
		c.Servers[i] = nil
	}
}

// URLs is a comma-separated client URL list of every configured server, for
// nats.Connect: clients fail over between them.
func (c *Cluster) URLs() string {
	var out string
	for i, o := range c.opts {
		if i > 0 {
			out += ","
		}
		out += fmt.Sprintf("nats://127.0.0.1:%d", o.Port)
	}
	return out
}

// Connect connects to the cluster; the connection is closed by Shutdown.
func (c *Cluster) Connect(opts ...nats.Option) (*nats.Conn, error) {
	for _, s := range c.Servers {
		if s != nil {
			nc, err := nats.Connect(c.URLs(), opts...)
			if err != nil {
				return nil, fmt.Errorf("natsembed: connect to cluster %s: %w", c.Name, err)
			}
			s.mu.Lock()
			s.clients = append(s.clients, nc)
			s.mu.Unlock()
			return nc, nil
		}
	}
	return nil, fmt.Errorf("natsembed: cluster %s has no running server", c.Name)
}

// WaitForMetaLeader waits until a JetStream meta leader is elected and knows
// every running server as a peer.
func (c *Cluster) WaitForMetaLeader(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	running := 0
	for _, s := range c.Servers {
		if s != nil {
			running++
		}
	}
	for time.Now().Before(deadline) {
		for _, s := range c.Servers {
			// A leader alone is not enough: until it has heard from every
			// running peer, an R3 stream fails placement ("no suitable
			// peers", 10005).
			if s != nil && s.JetStreamIsLeader() && len(s.JetStreamClusterPeers()) >= running {
				return nil
			}
		}
		time.Sleep(25 * time.Millisecond)
	}
	return fmt.Errorf("natsembed: cluster %s: no JetStream meta leader with all %d running peers within %s", c.Name, running, timeout)
}

// Shutdown stops every running server.
func (c *Cluster) Shutdown() {
	for i := range c.Servers {
		c.Stop(i)
	}
}
