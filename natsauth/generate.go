package natsauth

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nkeys"
	"golang.org/x/crypto/bcrypt"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/topology"
)

// Mode is how users authenticate.
type Mode string

// Authentication modes.
const (
	// ModeNKey: every user is an nkey (ed25519) user. The server config holds
	// only public keys, so it is not a secret; the seeds go to Secrets.
	// Preferred.
	ModeNKey Mode = "nkey"
	// ModePassword: user name and password. The server config holds bcrypt
	// hashes only; the clear passwords go to Secrets.
	ModePassword Mode = "password"
)

// Role is what a user is for.
type Role string

// Roles.
const (
	RoleController Role = "controller"
	RoleWorker     Role = "worker"
	// RoleReader reads history and nothing else (ReaderPermissions).
	RoleReader Role = "reader"
	// RoleCalloutService answers the server's authorization requests
	// (CalloutServicePermissions).
	RoleCalloutService Role = "callout"
)

// ControllerUser is the user name of the controller (password mode) and its
// label in the rendered configuration.
const ControllerUser = "switchback-controller"

// ReaderUser is the user name of the read-only user (password mode) and its
// label in the rendered configuration.
const ReaderUser = "switchback-reader"

// ReaderKey is the key of the reader's credential in Config.Existing. It
// cannot be a node name: those never hold '@'.
const ReaderKey = "@reader"

// WorkerUser is the user name of node's worker (password mode) and its label
// in the rendered configuration.
func WorkerUser(node string) string { return "switchback-worker-" + events.EncodeToken(node) }

// Credential is what one user authenticates with. Exactly one of NKey and
// Password is set, by Mode.
type Credential struct {
	// User is the user name (password mode) or a label (nkey mode).
	User string
	// Password is the clear password (password mode): it goes into the
	// user's Secret, never into the server configuration.
	Password string
	// PasswordHash is the bcrypt hash of Password, which the server
	// configuration holds. Generated when empty.
	PasswordHash string
	// NKey is the public user key ("U..."), which the server configuration holds.
	NKey string
	// Seed is the private seed ("SU..."): it goes into the user's Secret.
	// Empty when only the public key was supplied (Config.Existing).
	Seed []byte
}

// User is one NATS user of the deployment.
type User struct {
	Role Role
	// Node is the worker's node; empty for the controller and the reader.
	Node        string
	Credential  Credential
	Permissions Permissions
}

// Config says what to generate.
type Config struct {
	// Nodes are the nodes that run a worker (node names as Kubernetes spells
	// them). Each gets its own user.
	Nodes []string
	// Mode: ModeNKey (default) or ModePassword.
	Mode Mode
	// Account, when set, puts the users in an account of that name with
	// JetStream enabled under Limits (an `accounts` block), isolating
	// Switchback's subjects from other applications on a shared NATS; in
	// callout mode the callout places every worker in it too
	// (callout.Keys.Account). Empty uses the server's global account (an
	// `authorization` block), where no JetStream limit can be set.
	// `switchback nats-auth` defaults to DefaultAccount.
	Account string
	// NodeAccounts (with Account) puts each worker alone in an account of
	// its own without JetStream (NodeAccount), importing from Account only
	// what its permissions allow, with JetStream's API under
	// topology.NodeAPIPrefix: a reply a worker redirects then lands in its
	// own account, never in the streams' (docs/security.md). Its client must
	// use that prefix (Authorization.APIPrefix). With Callout, Nodes names
	// the nodes whose accounts are rendered, and the callout places each
	// worker in its node's (callout.Config.NodeAccounts).
	NodeAccounts bool
	// Limits are the account's JetStream limits (with Account only); a zero
	// field takes DefaultLimits' value.
	Limits Limits
	// SharedInbox lets workers subscribe to "_INBOX.>" instead of their own
	// prefix (InboxPrefix): only for clients that cannot set an inbox
	// prefix. With it, a worker can read the replies sent to other users
	// (not act on them: acks and appends stay denied).
	SharedInbox bool
	// Streams overrides stream and bucket names; zero = the defaults.
	Streams Streams
	// WorkerExtraPublish is added to every worker's publish allow list, e.g.
	// topology.SimSubjects for a simulated cluster.
	WorkerExtraPublish []string
	// Existing supplies credentials to keep (re-generation without rotating
	// everything), by node name; the controller's under the key "", the
	// reader's under ReaderKey. Their Mode-relevant fields must be set: NKey
	// (Seed optional) or Password.
	Existing map[string]Credential
	// BcryptCost for password hashes; default bcrypt.DefaultCost.
	BcryptCost int
	// Callout, when set, gives the workers their users through the NATS
	// auth callout (package natsauth/callout) instead of generating one per
	// node: Nodes stays empty (but with NodeAccounts), and the configuration holds the controller,
	// the reader and the callout service as static users (auth_users), and
	// an auth_callout block.
	Callout *Callout
}

// Callout is the server side of auth callout mode: public keys only, the
// seeds are the callout service's (natsauth/callout.Keys).
type Callout struct {
	// Issuer is the public account key ("A...") that signs every worker's
	// user.
	Issuer string
	// XKey is the public curve key ("X...") requests are encrypted to (they
	// carry the workers' tokens); empty sends them in clear to every
	// subscriber of $SYS.REQ.USER.AUTH.
	XKey string
	// Service is the callout service's own user: a public NKey, or a
	// PasswordHash. Its user name is CalloutServiceUser.
	Service Credential
	// Timeout is the server's authorization timeout, which bounds the wait
	// for the callout's answer; zero keeps the server's (2 s).
	Timeout time.Duration
}

// CalloutServiceUser is the label (nkey mode) or user name (password mode)
// of the auth callout service's user.
const CalloutServiceUser = "switchback-nats-callout"

// Authorization is a generated authorization: the users, and their rendering.
type Authorization struct {
	// Controller is the controller's user.
	Controller User
	// Reader is the read-only user: history, for operators
	// (ReaderPermissions).
	Reader User
	// Workers are the workers' users, sorted by node; none in callout mode.
	Workers []User
	// Service is the auth callout service's user (callout mode only).
	Service User

	cfg  Config
	text string
}

// Generate creates a user per node plus the controller's and the reader's,
// with fresh credentials (except those in cfg.Existing), and renders the
// server configuration, checking that nats-server accepts it.
func Generate(cfg Config) (*Authorization, error) {
	var err error
	if cfg.Mode, err = checkMode(cfg.Mode); err != nil {
		return nil, err
	}
	if cfg.BcryptCost == 0 {
		cfg.BcryptCost = bcrypt.DefaultCost
	}
	if err := CheckAccount(cfg.Account); err != nil {
		return nil, err
	}
	if cfg.Limits, err = cfg.Limits.withDefaults(cfg.Account); err != nil {
		return nil, err
	}
	if cfg.NodeAccounts && cfg.Account == "" {
		return nil, errors.New("natsauth: node accounts need an account for the streams")
	}
	var nodes []string
	switch {
	case cfg.Callout != nil && cfg.NodeAccounts && len(cfg.Nodes) == 0:
		// The controller renders the accounts of the nodes it sees
		// (Layout.Render): a cluster may have none yet.
	case cfg.Callout == nil || cfg.NodeAccounts:
		if nodes, err = checkNodes(cfg.Nodes); err != nil {
			return nil, err
		}
	}
	if cfg.Callout != nil {
		if err := checkCallout(cfg); err != nil {
			return nil, err
		}
	}
	cfg.Nodes = nodes

	a := &Authorization{cfg: cfg}
	cred, err := credential(cfg, "", "controller", ControllerUser)
	if err != nil {
		return nil, err
	}
	a.Controller = User{Role: RoleController, Credential: cred, Permissions: ControllerPermissions()}
	if cred, err = credential(cfg, ReaderKey, "reader", ReaderUser); err != nil {
		return nil, err
	}
	a.Reader = User{Role: RoleReader, Credential: cred, Permissions: ReaderPermissions(cfg.Streams)}
	if err := a.Reader.Permissions.validate(); err != nil {
		return nil, fmt.Errorf("natsauth: reader: %w", err)
	}
	if cfg.NodeAccounts {
		a.Reader.Permissions = readerAccountPermissions(a.Reader.Permissions)
	}
	for _, n := range nodes {
		if cfg.Callout != nil {
			break // the callout gives the workers their users
		}
		cred, err := credential(cfg, n, "worker "+n, WorkerUser(n))
		if err != nil {
			return nil, err
		}
		p := WorkerPermissions(n, cfg.Streams, cfg.SharedInbox, cfg.WorkerExtraPublish...)
		if err := p.validate(); err != nil {
			return nil, fmt.Errorf("natsauth: worker %s: %w", n, err)
		}
		if cfg.NodeAccounts {
			p = NodeWorkerPermissions(p)
		}
		a.Workers = append(a.Workers, User{Role: RoleWorker, Node: n, Credential: cred, Permissions: p})
	}
	if c := cfg.Callout; c != nil {
		c.Service.User = CalloutServiceUser
		a.Service = User{Role: RoleCalloutService, Credential: c.Service, Permissions: CalloutServicePermissions()}
	}
	a.text = a.render()
	if err := check(a.text); err != nil {
		return nil, fmt.Errorf("natsauth: the generated configuration does not load: %w", err)
	}
	return a, nil
}

// checkCallout says why cfg is not a valid callout mode configuration.
func checkCallout(cfg Config) error {
	c := cfg.Callout
	switch {
	case len(cfg.Nodes) > 0 && !cfg.NodeAccounts:
		return errors.New("natsauth: callout mode lists no node: the callout gives every worker its user (with NodeAccounts, the nodes whose accounts it places them in)")
	case !nkeys.IsValidPublicAccountKey(c.Issuer):
		return fmt.Errorf("natsauth: callout issuer %q is not a public account key", c.Issuer)
	case c.XKey != "" && !nkeys.IsValidPublicCurveKey(c.XKey):
		return fmt.Errorf("natsauth: callout xkey %q is not a public curve key", c.XKey)
	case c.Service.NKey == "" && c.Service.PasswordHash == "":
		return errors.New("natsauth: the callout service needs an nkey or a password hash")
	case c.Service.NKey != "" && !nkeys.IsValidPublicUserKey(c.Service.NKey):
		return fmt.Errorf("natsauth: callout service key %q is not a public user key", c.Service.NKey)
	}
	return nil
}

// checkMode returns mode, ModeNKey for "", or an error for an unknown one.
func checkMode(mode Mode) (Mode, error) {
	switch mode {
	case "":
		return ModeNKey, nil
	case ModeNKey, ModePassword:
		return mode, nil
	}
	return "", fmt.Errorf("natsauth: unknown mode %q (want %q or %q)", mode, ModeNKey, ModePassword)
}

// checkNodes returns the node names sorted, or why they are not a set of
// node names.
func checkNodes(nodes []string) ([]string, error) {
	if len(nodes) == 0 {
		return nil, errors.New("natsauth: at least one node is required")
	}
	nodes = slices.Clone(nodes)
	slices.Sort(nodes)
	var errs []error
	for i, n := range nodes {
		if i > 0 && n == nodes[i-1] {
			errs = append(errs, fmt.Errorf("node %q is listed twice", n))
			continue
		}
		// Node names are DNS subdomains; anything else cannot be a node and
		// would give a subject token nobody publishes on (or, as a file
		// name, a path out of WorkersDir).
		for _, msg := range validation.IsDNS1123Subdomain(n) {
			errs = append(errs, fmt.Errorf("node %q: %s", n, msg))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("natsauth: %w", err)
	}
	return nodes, nil
}

// credential returns the existing credential of key (a node, "" for the
// controller, ReaderKey) or a fresh one; who names the user in errors.
func credential(cfg Config, key, who, user string) (Credential, error) {
	if c, ok := cfg.Existing[key]; ok {
		c.User = user
		switch cfg.Mode {
		case ModeNKey:
			if !nkeys.IsValidPublicUserKey(c.NKey) {
				return Credential{}, fmt.Errorf("natsauth: %s: existing nkey %q is not a public user key", who, c.NKey)
			}
			if len(c.Seed) > 0 {
				kp, err := nkeys.FromSeed(c.Seed)
				if err != nil {
					return Credential{}, fmt.Errorf("natsauth: %s: existing seed: %w", who, err)
				}
				pub, err := kp.PublicKey()
				if err != nil || pub != c.NKey {
					return Credential{}, fmt.Errorf("natsauth: %s: the existing seed does not belong to nkey %s", who, c.NKey)
				}
			}
		case ModePassword:
			if c.Password == "" && c.PasswordHash == "" {
				return Credential{}, fmt.Errorf("natsauth: %s: existing credential has no password", who)
			}
			if c.PasswordHash == "" {
				h, err := bcrypt.GenerateFromPassword([]byte(c.Password), cfg.BcryptCost)
				if err != nil {
					return Credential{}, fmt.Errorf("natsauth: %s: hash password: %w", who, err)
				}
				c.PasswordHash = string(h)
			}
		}
		return c, nil
	}
	c := Credential{User: user}
	switch cfg.Mode {
	case ModeNKey:
		kp, err := nkeys.CreateUser()
		if err != nil {
			return Credential{}, fmt.Errorf("natsauth: %s: create nkey: %w", who, err)
		}
		if c.NKey, err = kp.PublicKey(); err != nil {
			return Credential{}, fmt.Errorf("natsauth: %s: nkey public key: %w", who, err)
		}
		if c.Seed, err = kp.Seed(); err != nil {
			return Credential{}, fmt.Errorf("natsauth: %s: nkey seed: %w", who, err)
		}
	case ModePassword:
		b := make([]byte, 24)
		if _, err := rand.Read(b); err != nil {
			return Credential{}, fmt.Errorf("natsauth: %s: random password: %w", who, err)
		}
		c.Password = base64.RawURLEncoding.EncodeToString(b)
		h, err := bcrypt.GenerateFromPassword([]byte(c.Password), cfg.BcryptCost)
		if err != nil {
			return Credential{}, fmt.Errorf("natsauth: %s: hash password: %w", who, err)
		}
		c.PasswordHash = string(h)
	}
	return c, nil
}

// CheckAccount says why name cannot name Switchback's account ("" is the
// global account).
func CheckAccount(name string) error {
	if strings.ContainsFunc(name, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	}) {
		return fmt.Errorf("natsauth: account %q: use letters, digits, '-' and '_' only", name)
	}
	return nil
}

// Mode returns the authentication mode.
func (a *Authorization) Mode() Mode { return a.cfg.Mode }

// Account returns the account name, empty for the global account.
func (a *Authorization) Account() string { return a.cfg.Account }

// APIPrefix is the JetStream API prefix of u's client: topology.NodeAPIPrefix
// for a worker in its node's account and for the reader in its own
// (Config.NodeAccounts), else JetStream's default ("").
func (a *Authorization) APIPrefix(u User) string {
	if a.cfg.NodeAccounts && (u.Role == RoleWorker || u.Role == RoleReader) {
		return topology.NodeAPIPrefix
	}
	return ""
}

// Nodes returns the nodes that have a worker user, sorted.
func (a *Authorization) Nodes() []string { return slices.Clone(a.cfg.Nodes) }

// Worker returns node's worker user.
func (a *Authorization) Worker(node string) (User, bool) {
	i, ok := slices.BinarySearchFunc(a.Workers, node, func(u User, n string) int { return strings.Compare(u.Node, n) })
	if !ok {
		return User{}, false
	}
	return a.Workers[i], true
}
