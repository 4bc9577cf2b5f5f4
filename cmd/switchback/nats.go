package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/natsauth"
	"github.com/switchback-dev/switchback/natsembed"
	"github.com/switchback-dev/switchback/workqueue"
)

// natsFlags select a NATS server: an external one (--nats-url and
// credentials), or an embedded one storing in --data-dir.
type natsFlags struct {
	url, creds, nkey, user, password string
	passwordFile                     string
	tlsCA, tlsCert, tlsKey           string
	dataDir, listen                  string
	port                             int
	replicas                         int
}

func (f *natsFlags) register(fs *flag.FlagSet, embeddedByDefault bool) {
	fs.StringVar(&f.url, "nats-url", "", "NATS server URL(s), comma-separated; empty runs an embedded server on --data-dir")
	fs.StringVar(&f.creds, "nats-creds", "", "NATS credentials file (JWT + nkey seed)")
	fs.StringVar(&f.nkey, "nats-nkey", "", "NATS nkey seed file")
	fs.StringVar(&f.user, "nats-user", "", "NATS user name")
	fs.StringVar(&f.password, "nats-password", "", "NATS password (or set NATS_PASSWORD)")
	fs.StringVar(&f.passwordFile, "nats-password-file", "", "file holding the NATS password, e.g. a worker's /etc/switchback/nats/$(NODE_NAME).password")
	fs.StringVar(&f.tlsCA, "nats-tls-ca", "", "CA bundle to verify the NATS server")
	fs.StringVar(&f.tlsCert, "nats-tls-cert", "", "client certificate for NATS mutual TLS")
	fs.StringVar(&f.tlsKey, "nats-tls-key", "", "client key for NATS mutual TLS")
	def := ""
	if embeddedByDefault {
		def = "switchback-data"
	}
	fs.StringVar(&f.dataDir, "data-dir", def, "embedded NATS: JetStream store directory")
	fs.StringVar(&f.listen, "nats-listen", "127.0.0.1", "embedded NATS: address to listen on")
	fs.IntVar(&f.port, "nats-port", 0, "embedded NATS: client port (0 = any free port)")
	fs.IntVar(&f.replicas, "stream-replicas", 1, "replicas of Switchback's streams (3 on a NATS cluster)")
}

// natsConn is an open connection and, for the embedded mode, its server.
type natsConn struct {
	server *natsembed.Server
	nc     *nats.Conn
	js     jetstream.JetStream
	store  *eventstore.Store
	queue  *workqueue.Queue
}

func (c *natsConn) Close() {
	if c.nc != nil {
		c.nc.Close()
	}
	if c.server != nil {
		c.server.Shutdown()
	}
}

// connectOptions say how a command uses NATS.
type connectOptions struct {
	// inProcessOnly: an embedded server takes no network clients.
	inProcessOnly bool
	// commandAckWait, when set, is the command consumers' AckWait: how long
	// a node's command waits for a dead worker before it is redelivered.
	// Only the controller's applies: it creates the consumers.
	commandAckWait time.Duration
	// worker, when set, connects as that node's worker: with its own inbox
	// prefix (the only subjects its NATS user may subscribe to) and binding
	// to the streams and consumers the controller created instead of
	// creating them (its user may not; docs/nats-authorization.md).
	worker string
}

// connect opens NATS (starting the embedded server when no URL is given),
// then the event store and the command queue. Permission violations are
// logged on every connection: NATS reports a denied publish only
// asynchronously, and a denied request only times out.
func (f *natsFlags) connect(ctx context.Context, name string, log *slog.Logger, o connectOptions) (*natsConn, error) {
	c := &natsConn{}
	opts := []nats.Option{nats.Name(name), nats.MaxReconnects(-1), (&natsauth.Violations{Log: log}).Option()}
	if o.worker != "" {
		opts = append(opts, natsauth.WorkerOptions(o.worker)...)
	}
	if f.url == "" {
		if f.dataDir == "" {
			return nil, errors.New("give --nats-url, or --data-dir for an embedded server")
		}
		srv, err := natsembed.Start(natsembed.Options{Name: name, Host: f.listen, Port: f.port, StoreDir: f.dataDir, InProcessOnly: o.inProcessOnly})
		if err != nil {
			return nil, err
		}
		c.server = srv
		nc, err := srv.Connect(opts...)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.nc = nc
	} else {
		auth, err := f.authOptions()
		if err != nil {
			return nil, err
		}
		nc, err := nats.Connect(f.url, append(opts, auth...)...)
		if err != nil {
			return nil, fmt.Errorf("connect to %s: %w", f.url, err)
		}
		c.nc = nc
	}
	js, err := jetstream.New(c.nc)
	if err != nil {
		c.Close()
		return nil, err
	}
	c.js = js
	if o.worker != "" {
		js = natsauth.BindOnly(js)
		if err := waitForStreams(ctx, js, log); err != nil {
			c.Close()
			return nil, err
		}
	}
	if c.store, err = eventstore.Open(ctx, js, eventstore.Config{Replicas: f.replicas, SnapshotNode: o.worker}); err != nil {
		c.Close()
		return nil, err
	}
	if c.queue, err = workqueue.Open(ctx, js, workqueue.Config{Replicas: f.replicas, AckWait: o.commandAckWait}); err != nil {
		c.Close()
		return nil, err
	}
	log.Debug("connected to NATS", "url", c.nc.ConnectedUrlRedacted(), "embedded", c.server != nil)
	return c, nil
}

func (f *natsFlags) authOptions() ([]nats.Option, error) {
	var opts []nats.Option
	if f.creds != "" {
		opts = append(opts, nats.UserCredentials(f.creds))
	}
	if f.nkey != "" {
		o, err := nats.NkeyOptionFromSeed(f.nkey)
		if err != nil {
			return nil, fmt.Errorf("--nats-nkey: %w", err)
		}
		opts = append(opts, o)
	}
	if f.user != "" {
		pw := f.password
		if f.passwordFile != "" {
			b, err := os.ReadFile(f.passwordFile)
			if err != nil {
				return nil, fmt.Errorf("--nats-password-file: %w", err)
			}
			pw = strings.TrimSpace(string(b))
		}
		if pw == "" {
			pw = os.Getenv("NATS_PASSWORD")
		}
		opts = append(opts, nats.UserInfo(f.user, pw))
	}
	if f.tlsCA != "" || f.tlsCert != "" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if f.tlsCA != "" {
			pem, err := os.ReadFile(f.tlsCA)
			if err != nil {
				return nil, fmt.Errorf("--nats-tls-ca: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("--nats-tls-ca %s: no certificate found", f.tlsCA)
			}
			cfg.RootCAs = pool
		}
		if f.tlsCert != "" {
			cert, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
			if err != nil {
				return nil, fmt.Errorf("--nats-tls-cert/--nats-tls-key: %w", err)
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		opts = append(opts, nats.Secure(cfg))
	}
	return opts, nil
}
