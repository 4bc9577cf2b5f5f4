package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/natsauth"
	"github.com/switchback-dev/switchback/natsauth/callout"
	"github.com/switchback-dev/switchback/natsembed"
	"github.com/switchback-dev/switchback/nodequeue"
	"github.com/switchback-dev/switchback/topology"
)

// passwordEnv is the environment variable holding the NATS password when
// no --nats-password-file is given.
const passwordEnv = "SWITCHBACK_NATS_PASSWORD"

// natsFlags select a NATS server: an external one (--nats-url and
// credentials), or an embedded one storing in --data-dir.
type natsFlags struct {
	url, creds, nkey, user string
	passwordFile           string
	retiredPassword        retiredFlag
	tlsCA, tlsCert, tlsKey string
	dataDir, listen        string
	port                   int
	replicas               int
	apiPrefix              string
	pingInterval           time.Duration
}

// register adds the NATS flags; embeddable commands also take the embedded
// server's (an empty --nats-url runs one on --data-dir), a worker never
// does: it joins the controller's NATS.
func (f *natsFlags) register(fs *pflag.FlagSet, embeddable bool) {
	urlHelp := "NATS server URL(s), comma-separated (nats://, or tls:// to require TLS), without credentials"
	if embeddable {
		urlHelp += "; empty runs an embedded server on --data-dir"
	} else {
		urlHelp += " (required)"
	}
	inSection(fs, flagsNATS, func() {
		fs.StringVar(&f.url, "nats-url", "", urlHelp)
		fs.StringVar(&f.creds, "nats-creds", "", "NATS credentials file (JWT + nkey seed)")
		fs.StringVar(&f.nkey, "nats-nkey", "", "NATS nkey seed file")
		fs.StringVar(&f.user, "nats-user", "", "NATS user name (its password from --nats-password-file or $"+passwordEnv+")")
		fs.Var(&f.retiredPassword, "nats-password", "retired: a password in the arguments is visible to anyone who can list processes; use --nats-password-file or $"+passwordEnv)
		_ = fs.MarkHidden("nats-password") // retired: refused with what replaces it, never offered
		fs.StringVar(&f.passwordFile, "nats-password-file", "", "file holding the NATS password, e.g. a worker's /etc/switchback/nats/$(NODE_NAME).password")
		fs.StringVar(&f.tlsCA, "nats-ca", "", "PEM CA bundle to verify the NATS server with; when set, the connection requires TLS")
		fs.StringVar(&f.tlsCert, "nats-cert", "", "client certificate (PEM) for NATS mutual TLS, with --nats-key")
		fs.StringVar(&f.tlsKey, "nats-key", "", "client key (PEM) for NATS mutual TLS, with --nats-cert")
		fs.IntVar(&f.replicas, "stream-replicas", 1, "replicas of Switchback's streams (3 on a NATS cluster)")
		fs.DurationVar(&f.pingInterval, "nats-ping-interval", defaultPingInterval, "how often the client pings the NATS server; a connection that misses "+fmt.Sprint(nats.DefaultMaxPingOut)+" pings in a row is taken as lost and dialled again (a silent network partition is noticed within about that many intervals)")
		fs.StringVar(&f.apiPrefix, "nats-api-prefix", "", "JetStream API prefix: "+strings.TrimSuffix(topology.NodeAPIPrefix, ".")+" for a worker alone in its node's account, and for the reader in its own (nats-auth --node-accounts: history and replay then read by direct gets); empty = JetStream's own")
	})
	if !embeddable {
		return
	}
	inSection(fs, flagsEmbedded, func() {
		fs.StringVar(&f.dataDir, "data-dir", "", "embedded NATS: JetStream store directory")
		fs.StringVar(&f.listen, "nats-listen", "127.0.0.1", "embedded NATS: address to listen on")
		fs.IntVar(&f.port, "nats-port", 0, "embedded NATS: client port (0 = any free port)")
	})
}

// defaultPingInterval bounds how long a connection that a partition
// silently cut (no reset, no FIN) passes for alive: nats.go's own default of
// two minutes leaves a worker believing it is connected for four.
const defaultPingInterval = 20 * time.Second

// natsConn is an open connection and, for the embedded mode, its server.
type natsConn struct {
	server *natsembed.Server
	nc     *nats.Conn
	js     jetstream.JetStream
	store  *eventstore.Store
	queue  *nodequeue.Queue
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
	// tokenFile, for a worker, is its projected ServiceAccount token: it
	// connects through the NATS auth callout, presenting the token read
	// anew at every (re)connect (natsauth/callout.WorkerOptions).
	tokenFile string
	// readOnly connects a command that only reads history (history,
	// replay): with the reader's inbox prefix, so that it works as the
	// read-only NATS user, binding to the event stream rather than
	// creating or updating it (a read changes nothing, not even a stream's
	// configuration), and without the command queue.
	readOnly bool
}

// connect opens NATS (starting the embedded server when no URL is given),
// then the event store and (unless o.readOnly) the command queue. Permission violations are
// logged on every connection: NATS reports a denied publish only
// asynchronously, and a denied request only times out.
func (f *natsFlags) connect(ctx context.Context, name string, log *slog.Logger, o connectOptions) (*natsConn, error) {
	if err := f.validate(); err != nil {
		return nil, err
	}
	c := &natsConn{}
	if f.pingInterval <= 0 {
		return nil, fmt.Errorf("--nats-ping-interval %s: must be positive: %w", f.pingInterval, errUsage)
	}
	opts := []nats.Option{nats.Name(name), nats.MaxReconnects(-1), nats.PingInterval(f.pingInterval), (&natsauth.Violations{Log: log}).Option()}
	switch {
	case o.worker != "" && o.tokenFile != "":
		opts = append(opts, callout.WorkerOptions(o.worker, o.tokenFile, log)...)
	case o.worker != "":
		opts = append(opts, natsauth.WorkerOptions(o.worker)...)
	case o.readOnly:
		opts = append(opts, natsauth.ReaderOptions()...)
	}
	if f.url == "" {
		if f.dataDir == "" {
			return nil, errors.New("give --nats-url, or --data-dir for an embedded server")
		}
		if o.readOnly {
			// A read never starts a store: a mistyped directory would be
			// created empty and read as "no history".
			if err := holdsStore(f.dataDir); err != nil {
				return nil, err
			}
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
		nc, err := dial(ctx, f.url, append(opts, auth...), o.worker != "", log)
		if err != nil {
			return nil, explainNATS(redactURL(f.url), err)
		}
		c.nc = nc
	}
	js, err := natsauth.JetStream(c.nc, f.apiPrefix)
	if err != nil {
		c.Close()
		return nil, err
	}
	c.js = js
	switch {
	case o.worker != "":
		js = natsauth.BindOnly(js)
		if err := waitForStreams(ctx, js, log); err != nil {
			c.Close()
			return nil, err
		}
	case o.readOnly:
		js = natsauth.BindOnly(js)
	}
	// A reader behind an API prefix is in an account of its own
	// (nats-auth --node-accounts), which imports no consumer API: it scans
	// by direct gets.
	direct := o.readOnly && f.apiPrefix != ""
	if c.store, err = eventstore.Open(ctx, js, eventstore.Config{Replicas: f.replicas, ReadOnlySnapshots: o.worker != "", DirectScans: direct}); err != nil {
		c.Close()
		return nil, explainStream(redactURL(c.nc.ConnectedUrl()), err)
	}
	if !o.readOnly {
		if c.queue, err = nodequeue.Open(ctx, js, nodequeue.Config{Replicas: f.replicas, AckWait: o.commandAckWait}); err != nil {
			c.Close()
			return nil, err
		}
	}
	log.Debug("connected to NATS", "url", redactURL(c.nc.ConnectedUrl()), "embedded", c.server != nil)
	return c, nil
}

// dial connects to url. A worker (retry) keeps trying until ctx ends: it
// may start before NATS or, in callout mode, before the controller that
// answers for its token, and its health endpoint says it is waiting; any
// other command fails at once, so that a wrong URL or credential is said.
func dial(ctx context.Context, url string, opts []nats.Option, retry bool, log *slog.Logger) (*nats.Conn, error) {
	const most = 5 * time.Second
	wait := 250 * time.Millisecond
	for {
		nc, err := nats.Connect(url, opts...)
		if err == nil || !retry {
			return nc, err
		}
		log.Warn("cannot connect to NATS yet; retrying", "url", redactURL(url), "in", wait, "error", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, errors.Join(err, ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, most)
	}
}

// connectCallout opens the NATS auth callout service's own connection: its
// static user (keys.Service), the process's TLS options. The callout needs
// a NATS URL: an embedded server has no callout.
func (f *natsFlags) connectCallout(keys callout.Keys, log *slog.Logger) (*nats.Conn, error) {
	if f.url == "" {
		return nil, fmt.Errorf("--nats-callout needs --nats-url (the servers that call out): %w", errUsage)
	}
	pub, err := keys.Service.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("--nats-callout: %w", err)
	}
	opts, err := f.tlsOptions()
	if err != nil {
		return nil, err
	}
	opts = append(opts, nats.Name(natsauth.CalloutServiceUser), nats.MaxReconnects(-1), nats.PingInterval(f.pingInterval), nats.Nkey(pub, keys.Service.Sign),
		(&natsauth.Violations{Log: log}).Option())
	nc, err := nats.Connect(f.url, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect the NATS auth callout to %s: %w", redactURL(f.url), err)
	}
	return nc, nil
}

// validate refuses a secret in the arguments, where anyone who can list
// processes (ps, /proc/<pid>/cmdline) or read the pod spec reads it too,
// and half a client certificate.
func (f *natsFlags) validate() error {
	if f.retiredPassword.set {
		return fmt.Errorf("--nats-password is retired (a password in the arguments is visible to anyone who can list processes or read the pod spec): use --nats-password-file FILE or the environment variable %s: %w", passwordEnv, errUsage)
	}
	for u := range strings.SplitSeq(f.url, ",") {
		if strings.Contains(u, "@") {
			return fmt.Errorf("--nats-url %s carries credentials, visible to anyone who can list processes: give the URL alone and --nats-user with --nats-password-file or $%s (or --nats-nkey, --nats-creds): %w",
				redactURL(u), passwordEnv, errUsage)
		}
	}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return fmt.Errorf("--nats-cert and --nats-key go together (the client certificate and its key): %w", errUsage)
	}
	return nil
}

// redactURL returns the NATS server URL(s) s, comma-separated as --nats-url
// takes them, without their secrets, for logs and errors: a password
// becomes "***" (nats://user:***@host:4222), and so does a user part
// without a password, which nats.go sends as a token (nats://***@host:4222).
func redactURL(s string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		scheme, rest, hasScheme := strings.Cut(p, "://")
		if !hasScheme {
			scheme, rest = "", p
		}
		// The last '@': a password may hold one unescaped.
		at := strings.LastIndex(rest, "@")
		if at < 0 {
			continue
		}
		user, _, hasPassword := strings.Cut(rest[:at], ":")
		redacted := "***"
		if hasPassword {
			redacted = user + ":***"
		}
		parts[i] = redacted + rest[at:]
		if hasScheme {
			parts[i] = scheme + "://" + parts[i]
		}
	}
	return strings.Join(parts, ",")
}

// retiredFlag is a flag no longer accepted: Set records that it was given
// and drops the value unseen (the flag package would print a value Set
// refuses, here a secret, on stderr), and validate refuses to go on.
type retiredFlag struct{ set bool }

func (r *retiredFlag) String() string { return "" }

// Type names the value in the help.
func (r *retiredFlag) Type() string { return "retired" }

func (r *retiredFlag) Set(string) error {
	r.set = true
	return nil
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
	switch {
	case f.user != "":
		pw := os.Getenv(passwordEnv)
		if f.passwordFile != "" {
			b, err := os.ReadFile(f.passwordFile)
			if err != nil {
				return nil, fmt.Errorf("--nats-password-file: %w", err)
			}
			pw = strings.TrimSpace(string(b))
		}
		opts = append(opts, nats.UserInfo(f.user, pw))
	case f.passwordFile != "":
		// Silently connecting without the password would only fail later,
		// as an authorization violation naming nothing.
		return nil, fmt.Errorf("--nats-password-file needs --nats-user (whose password it is): %w", errUsage)
	}
	tlsOpts, err := f.tlsOptions()
	if err != nil {
		return nil, err
	}
	return append(opts, tlsOpts...), nil
}

// tlsOptions are the connection's TLS options (--nats-ca, --nats-cert,
// --nats-key), for every connection of the process.
func (f *natsFlags) tlsOptions() ([]nats.Option, error) {
	var opts []nats.Option
	if f.tlsCA != "" || f.tlsCert != "" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if f.tlsCA != "" {
			pem, err := os.ReadFile(f.tlsCA)
			if err != nil {
				return nil, fmt.Errorf("--nats-ca: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("--nats-ca %s: no certificate found", f.tlsCA)
			}
			cfg.RootCAs = pool
		}
		if f.tlsCert != "" {
			cert, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
			if err != nil {
				return nil, fmt.Errorf("--nats-cert/--nats-key: %w", err)
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		// Secure makes TLS required, whatever the URL's scheme: a server
		// offering none is refused rather than spoken to in the clear.
		opts = append(opts, nats.Secure(cfg))
	}
	return opts, nil
}

// holdsStore says why dir is not a store Switchback's embedded server wrote:
// JetStream keeps each stream under jetstream/<account>/streams/<name>.
func holdsStore(dir string) error {
	found, err := filepath.Glob(filepath.Join(dir, "jetstream", "*", "streams", topology.EventStream))
	if err == nil && len(found) > 0 {
		return nil
	}
	if _, err := os.Stat(dir); err != nil {
		return fmt.Errorf("--data-dir %s: %w: give the directory a demo or an embedded controller stored its history in", dir, err)
	}
	return fmt.Errorf("--data-dir %s holds no Switchback history (no jetstream/<account>/streams/%s): give the directory a demo or an embedded controller stored it in", dir, topology.EventStream)
}
