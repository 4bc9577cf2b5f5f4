package natsauth

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nkeys"
	"golang.org/x/crypto/bcrypt"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/switchback-dev/switchback/events"
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
)

// ControllerUser is the user name of the controller (password mode) and its
// label in the rendered configuration.
const ControllerUser = "switchback-controller"

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
	// Node is the worker's node; empty for the controller.
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
	// JetStream enabled (an `accounts` block), isolating Switchback's
	// subjects from other applications on a shared NATS. Empty uses the
	// server's global account (an `authorization` block).
	Account string
	// SharedInbox lets workers subscribe to "_INBOX.>" instead of their own
	// prefix (InboxPrefix): only for clients that cannot set an inbox
	// prefix. With it, a worker can read the replies sent to other users
	// (not act on them: acks and appends stay denied).
	SharedInbox bool
	// Streams overrides stream and bucket names; zero = the defaults.
	Streams Streams
	// WorkerExtraPublish is added to every worker's publish allow list, e.g.
	// SimDataPlaneSubjects for a simulated cluster.
	WorkerExtraPublish []string
	// Existing supplies credentials to keep (re-generation without rotating
	// everything), by node name; the controller's under the key "" . Its
	// Mode-relevant fields must be set: NKey (Seed optional) or Password.
	Existing map[string]Credential
	// BcryptCost for password hashes; default bcrypt.DefaultCost.
	BcryptCost int
}

// Authorization is a generated authorization: the users, and their rendering.
type Authorization struct {
	// Controller is the controller's user.
	Controller User
	// Workers are the workers' users, sorted by node.
	Workers []User

	cfg  Config
	text string
}

// Generate creates a user per node plus the controller's, with fresh
// credentials (except those in cfg.Existing), and renders the server
// configuration, checking that nats-server accepts it.
func Generate(cfg Config) (*Authorization, error) {
	if cfg.Mode == "" {
		cfg.Mode = ModeNKey
	}
	if cfg.Mode != ModeNKey && cfg.Mode != ModePassword {
		return nil, fmt.Errorf("natsauth: unknown mode %q (want %q or %q)", cfg.Mode, ModeNKey, ModePassword)
	}
	if cfg.BcryptCost == 0 {
		cfg.BcryptCost = bcrypt.DefaultCost
	}
	if cfg.Account != "" && !validAccountName(cfg.Account) {
		return nil, fmt.Errorf("natsauth: account %q: use letters, digits, '-' and '_' only", cfg.Account)
	}
	if len(cfg.Nodes) == 0 {
		return nil, errors.New("natsauth: at least one node is required")
	}
	nodes := slices.Clone(cfg.Nodes)
	slices.Sort(nodes)
	var errs []error
	for i, n := range nodes {
		if i > 0 && n == nodes[i-1] {
			errs = append(errs, fmt.Errorf("node %q is listed twice", n))
			continue
		}
		// Node names are DNS subdomains; anything else cannot be a node and
		// would give a subject token nobody publishes on.
		for _, msg := range validation.IsDNS1123Subdomain(n) {
			errs = append(errs, fmt.Errorf("node %q: %s", n, msg))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("natsauth: %w", err)
	}
	cfg.Nodes = nodes

	a := &Authorization{cfg: cfg}
	cred, err := credential(cfg, "", ControllerUser)
	if err != nil {
		return nil, err
	}
	a.Controller = User{Role: RoleController, Credential: cred, Permissions: ControllerPermissions()}
	for _, n := range nodes {
		cred, err := credential(cfg, n, WorkerUser(n))
		if err != nil {
			return nil, err
		}
		p := WorkerPermissions(n, cfg.Streams, cfg.SharedInbox, cfg.WorkerExtraPublish...)
		if err := p.validate(); err != nil {
			return nil, fmt.Errorf("natsauth: worker %s: %w", n, err)
		}
		a.Workers = append(a.Workers, User{Role: RoleWorker, Node: n, Credential: cred, Permissions: p})
	}
	a.text = a.render()
	if err := check(a.text); err != nil {
		return nil, fmt.Errorf("natsauth: the generated configuration does not load: %w", err)
	}
	return a, nil
}

// credential returns the existing credential of key (a node, or "" for the
// controller) or a fresh one.
func credential(cfg Config, key, user string) (Credential, error) {
	who := "controller"
	if key != "" {
		who = "worker " + key
	}
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

func validAccountName(s string) bool {
	return s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	})
}

// Mode returns the authentication mode.
func (a *Authorization) Mode() Mode { return a.cfg.Mode }

// Account returns the account name, empty for the global account.
func (a *Authorization) Account() string { return a.cfg.Account }

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
