package callout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/switchback-dev/switchback/natsauth"
)

// Defaults of Config.
const (
	// DefaultAudience is the audience of the workers' projected tokens: a
	// token for NATS is not a token for the apiserver, and the reverse.
	DefaultAudience = "switchback-nats"
	// DefaultServiceAccount is the workers' ServiceAccount (deploy/rbac).
	DefaultServiceAccount = "switchback-worker"
	// DefaultQueue is the queue group of the Service's subscription: every
	// controller replica serves, each request is answered by one.
	DefaultQueue = "switchback-nats-callout"
	// DefaultMaxTTL caps a worker user's lifetime below its token's.
	DefaultMaxTTL = time.Hour
	// DefaultReviewTimeout bounds one TokenReview. nats-server waits for the
	// answer for its authorization timeout (2 s by default): a later answer
	// is wasted.
	DefaultReviewTimeout = 1500 * time.Millisecond
	// DefaultWorkers is how many requests are decided at once.
	DefaultWorkers = 8
)

// MaxTokenSize bounds the token sent to the apiserver. ServiceAccount
// tokens are about 1 KiB; anything near this is not one.
const MaxTokenSize = 16 << 10

// backlog is how many requests wait for a free worker; beyond it nats.go
// drops them (slow consumer) and those clients time out and retry.
const backlog = 1024

// maxPending bounds the requests remembered against replay: each is kept
// until it expires (the server's authorization timeout), so this is far
// above any real connect rate.
const maxPending = 1 << 16

// Config configures a Service.
type Config struct {
	// Issuer signs the responses and the users: an account key pair (seed
	// "SA..."). Its public key is the server's auth_callout issuer.
	Issuer nkeys.KeyPair
	// XKey, when set, is the curve key pair ("SX...") whose public key is
	// the server's auth_callout xkey: requests (which carry the tokens) are
	// then encrypted to it and the responses encrypted back, so no other
	// subscriber of $SYS.REQ.USER.AUTH can read a token.
	XKey nkeys.KeyPair
	// Reviewer verifies the tokens: KubeReviewer, usually behind NewCache.
	Reviewer TokenReviewer
	// Namespace and ServiceAccount name the only user admitted:
	// system:serviceaccount:<Namespace>:<ServiceAccount>. ServiceAccount
	// defaults to DefaultServiceAccount; Namespace is required.
	Namespace      string
	ServiceAccount string
	// Audience the tokens must be valid for; default DefaultAudience.
	Audience string
	// Account is the NATS account every worker is placed in: the one the
	// streams are in (natsauth.Config.Account, carried by Keys.Account);
	// empty is the server's global account.
	Account string
	// NodeAccounts, when set (with Account), are the nodes whose accounts
	// the server's configuration holds (natsauth.Config.NodeAccounts with
	// Nodes, carried by Keys.NodeAccounts): each worker is placed alone in
	// its node's (natsauth.NodeAccount) with its permissions as its imports
	// put them, and a worker of any other node is refused.
	NodeAccounts []string
	// ReadNodeAccounts, when set with NodeAccounts, reads the node list
	// again (the callout's mounted Secret, which the kubelet updates in a
	// running pod) when a worker of a node not in the list arrives: a node
	// added by regenerating the layout and reloading NATS is then admitted
	// without restarting the controller. A nil list or an error keeps the
	// list in use.
	ReadNodeAccounts func() ([]string, error)
	// MaxTTL caps a user's lifetime (it never outlives its token); default
	// DefaultMaxTTL. The server closes the connection when the user
	// expires, and the worker reconnects with its current token.
	MaxTTL time.Duration
	// ReviewTimeout bounds one TokenReview; default DefaultReviewTimeout.
	ReviewTimeout time.Duration
	// Workers is how many requests are decided concurrently; default
	// DefaultWorkers.
	Workers int
	// Queue is the queue group; default DefaultQueue.
	Queue string
	// Streams, SharedInbox and WorkerExtraPublish are passed to
	// natsauth.WorkerPermissions, as natsauth.Config's are.
	Streams            natsauth.Streams
	SharedInbox        bool
	WorkerExtraPublish []string
	// Log gets every decision; default slog.Default().
	Log *slog.Logger
}

// Service answers nats-server's authorization requests for node workers.
// Start (or Run) it on a connection of the callout service user
// (natsauth.CalloutServiceUser).
type Service struct {
	cfg       Config
	issuerPub string
	username  string
	log       *slog.Logger
	pending   *replays
	// nodeAccounts is the node list in use: Config.NodeAccounts, or what
	// Config.ReadNodeAccounts read last.
	nodeAccounts atomic.Pointer[[]string]

	mu     sync.Mutex
	sub    *nats.Subscription
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// account is the name the server knows the workers' account by.
func (s *Service) account() string {
	if s.cfg.Account == "" {
		return server.DEFAULT_GLOBAL_ACCOUNT
	}
	return s.cfg.Account
}

// New checks cfg and returns a Service.
func New(cfg Config) (*Service, error) {
	if cfg.Issuer == nil {
		return nil, errors.New("callout: an issuer account key pair is required")
	}
	pub, err := cfg.Issuer.PublicKey()
	if err != nil || !nkeys.IsValidPublicAccountKey(pub) {
		return nil, fmt.Errorf("callout: the issuer must be an account key pair (seed SA...): %q", pub)
	}
	if _, err := cfg.Issuer.Seed(); err != nil {
		return nil, fmt.Errorf("callout: issuer %s: no private key to sign with: %w", pub, err)
	}
	if cfg.XKey != nil {
		x, err := cfg.XKey.PublicKey()
		if err != nil || !nkeys.IsValidPublicCurveKey(x) {
			return nil, fmt.Errorf("callout: the xkey must be a curve key pair (seed SX...): %q", x)
		}
	}
	if err := natsauth.CheckAccount(cfg.Account); err != nil {
		return nil, fmt.Errorf("callout: %w", err)
	}
	if cfg.NodeAccounts != nil && cfg.Account == "" {
		return nil, errors.New("callout: node accounts need the streams' account (Account)")
	}
	if cfg.Reviewer == nil {
		return nil, errors.New("callout: a token reviewer is required")
	}
	if cfg.Namespace == "" {
		return nil, errors.New("callout: the workers' namespace is required")
	}
	if cfg.ServiceAccount == "" {
		cfg.ServiceAccount = DefaultServiceAccount
	}
	if cfg.Audience == "" {
		cfg.Audience = DefaultAudience
	}
	if cfg.MaxTTL <= 0 {
		cfg.MaxTTL = DefaultMaxTTL
	}
	if cfg.ReviewTimeout <= 0 {
		cfg.ReviewTimeout = DefaultReviewTimeout
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.Queue == "" {
		cfg.Queue = DefaultQueue
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	s := &Service{
		cfg: cfg, issuerPub: pub,
		username: "system:serviceaccount:" + cfg.Namespace + ":" + cfg.ServiceAccount,
		log:      cfg.Log.With("component", "nats-callout"),
		pending:  &replays{seen: make(map[string]time.Time), max: maxPending},
	}
	nodes := slices.Clone(cfg.NodeAccounts)
	s.nodeAccounts.Store(&nodes)
	return s, nil
}

// Run serves on nc until ctx ends.
func (s *Service) Run(ctx context.Context, nc *nats.Conn) error {
	if err := s.Start(nc); err != nil {
		return err
	}
	<-ctx.Done()
	s.Stop()
	return nil
}

// Start subscribes to the authorization requests (queue group Config.Queue)
// and serves them in the background until Stop. The server holds the
// subscription when Start returns.
func (s *Service) Start(nc *nats.Conn) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sub != nil {
		return errors.New("callout: already started")
	}
	msgs := make(chan *nats.Msg, backlog)
	sub, err := nc.ChanQueueSubscribe(server.AuthCalloutSubject, s.cfg.Queue, msgs)
	if err != nil {
		return fmt.Errorf("callout: subscribe to %s: %w", server.AuthCalloutSubject, err)
	}
	if err := nc.Flush(); err != nil {
		_ = sub.Unsubscribe()
		return fmt.Errorf("callout: subscribe to %s: %w", server.AuthCalloutSubject, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	for range s.cfg.Workers {
		s.wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case m := <-msgs:
					s.handle(ctx, m)
				}
			}
		})
	}
	s.sub, s.cancel = sub, cancel
	s.log.Info("serving NATS auth callout", "subject", server.AuthCalloutSubject, "queue", s.cfg.Queue,
		"issuer", s.issuerPub, "encrypted", s.cfg.XKey != nil, "user", s.username, "audience", s.cfg.Audience, "account", s.account())
	return nil
}

// Stop unsubscribes and waits for the requests being decided. New
// connections are refused by the server (after its authorization timeout)
// until another replica serves; established ones are not affected.
func (s *Service) Stop() {
	s.mu.Lock()
	sub, cancel := s.sub, s.cancel
	s.sub, s.cancel = nil, nil
	s.mu.Unlock()
	if sub == nil {
		return
	}
	if err := sub.Unsubscribe(); err != nil {
		s.log.Warn("unsubscribe from the authorization requests", "error", err)
	}
	cancel()
	s.wg.Wait()
}

func (s *Service) handle(ctx context.Context, m *nats.Msg) {
	if err := m.Respond(s.answer(ctx, m.Data, m.Header.Get(server.AuthRequestXKeyHeader))); err != nil {
		s.log.Error("answer an authorization request", "error", err)
	}
}
