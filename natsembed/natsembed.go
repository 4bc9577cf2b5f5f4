// Package natsembed runs a NATS server with JetStream inside the process: for
// the demo, the default single-binary run mode, and every integration test.
// It owns the client connections it hands out so that Shutdown can close them
// before the server stops (closing them after leaks reconnect goroutines).
package natsembed

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Options configure one embedded server.
type Options struct {
	// Name is the server name; required in a cluster, defaulted otherwise.
	Name string
	// Host to listen on; default 127.0.0.1 (never a public interface by default).
	Host string
	// Port for clients: 0 picks a free port, -1 too (nats-server's convention).
	Port int
	// InProcessOnly listens on no socket; clients connect in-process only.
	InProcessOnly bool
	// StoreDir is the JetStream file store; required, so state survives restarts.
	StoreDir string
	// Cluster joins a JetStream cluster when set.
	Cluster *ClusterOptions
	// ReadyTimeout bounds the wait for the server to accept clients; default 10s.
	ReadyTimeout time.Duration
	// Logger receives the server's log at the matching slog levels; nil = silent.
	Logger *slog.Logger
	// Configure, if set, may adjust the server options last (auth, TLS, limits).
	Configure func(*server.Options)
}

// ClusterOptions place a server in a cluster.
type ClusterOptions struct {
	Name string
	// Port for routes on Host.
	Port int
	// Routes are the other servers' route URLs (nats-route://host:port).
	Routes []string
	// NoAdvertise keeps the server from telling clients the other
	// servers' client URLs: a client reaches only the URLs it was given.
	NoAdvertise bool
}

// Server is a running embedded server.
type Server struct {
	*server.Server
	opts Options

	mu      sync.Mutex
	clients []*nats.Conn
}

// Start starts a server and waits until it accepts clients.
func Start(opts Options) (*Server, error) {
	if opts.StoreDir == "" {
		return nil, errors.New("natsembed: StoreDir is required")
	}
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if opts.Port == 0 {
		opts.Port = server.RANDOM_PORT
	}
	if opts.Name == "" {
		opts.Name = "switchback-embedded"
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 10 * time.Second
	}
	so := &server.Options{
		ServerName: opts.Name,
		Host:       opts.Host,
		Port:       opts.Port,
		DontListen: opts.InProcessOnly,
		JetStream:  true,
		StoreDir:   opts.StoreDir,
		NoSigs:     true,
		NoLog:      opts.Logger == nil,
	}
	if c := opts.Cluster; c != nil {
		so.Cluster = server.ClusterOpts{Name: c.Name, Host: opts.Host, Port: c.Port, NoAdvertise: c.NoAdvertise}
		for _, r := range c.Routes {
			u, err := url.Parse(r)
			if err != nil {
				return nil, fmt.Errorf("natsembed: route %q: %w", r, err)
			}
			so.Routes = append(so.Routes, u)
		}
	}
	if opts.Configure != nil {
		opts.Configure(so)
	}
	ns, err := server.NewServer(so)
	if err != nil {
		return nil, fmt.Errorf("natsembed: new server %s: %w", opts.Name, err)
	}
	if opts.Logger != nil {
		ns.SetLoggerV2(slogAdapter{opts.Logger.With("nats_server", opts.Name)}, false, false, false)
	}
	ns.Start()
	if !ns.ReadyForConnections(opts.ReadyTimeout) {
		ns.Shutdown()
		ns.WaitForShutdown()
		return nil, fmt.Errorf("natsembed: server %s not ready within %s", opts.Name, opts.ReadyTimeout)
	}
	return &Server{Server: ns, opts: opts}, nil
}

// URL is the client URL; empty for an in-process-only server.
func (s *Server) URL() string {
	if s.opts.InProcessOnly {
		return ""
	}
	return s.ClientURL()
}

// Connect opens a client connection that Shutdown will close first.
func (s *Server) Connect(opts ...nats.Option) (*nats.Conn, error) {
	var (
		nc  *nats.Conn
		err error
	)
	if s.opts.InProcessOnly {
		nc, err = nats.Connect("", append([]nats.Option{nats.InProcessServer(s.Server)}, opts...)...)
	} else {
		nc, err = nats.Connect(s.ClientURL(), opts...)
	}
	if err != nil {
		return nil, fmt.Errorf("natsembed: connect to %s: %w", s.opts.Name, err)
	}
	s.mu.Lock()
	s.clients = append(s.clients, nc)
	s.mu.Unlock()
	return nc, nil
}

// Shutdown closes every connection handed out by Connect, then stops the
// server and waits for it. It is safe to call more than once.
func (s *Server) Shutdown() {
	s.mu.Lock()
	clients := s.clients
	s.clients = nil
	s.mu.Unlock()
	for _, nc := range clients {
		nc.Close()
	}
	s.Server.Shutdown()
	s.WaitForShutdown()
}

type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Noticef(f string, v ...any) { a.l.Info(fmt.Sprintf(f, v...)) }
func (a slogAdapter) Warnf(f string, v ...any)   { a.l.Warn(fmt.Sprintf(f, v...)) }
func (a slogAdapter) Fatalf(f string, v ...any)  { a.l.Error(fmt.Sprintf(f, v...)) }
func (a slogAdapter) Errorf(f string, v ...any)  { a.l.Error(fmt.Sprintf(f, v...)) }
func (a slogAdapter) Debugf(f string, v ...any)  { a.l.Debug(fmt.Sprintf(f, v...)) }
func (a slogAdapter) Tracef(f string, v ...any)  { a.l.Debug(fmt.Sprintf(f, v...)) }
