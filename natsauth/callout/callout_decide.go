package callout

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/switchback-dev/switchback/metrics"
	"github.com/switchback-dev/switchback/natsauth"
)

// decision is the outcome of one request, for the log and the counter.
type decision struct {
	reason string
	err    error // why it was refused; nil when allowed
	node   string
	review Review
}

// answer returns the reply to one request: a signed authorization response
// (encrypted when the request was), or an empty reply, which the server
// takes as a refusal, when the request itself is not to be trusted with a
// signed answer.
func (s *Service) answer(ctx context.Context, data []byte, serverXKey string) []byte {
	req, err := s.request(data, serverXKey)
	if err != nil {
		s.record(nil, decision{reason: ReasonBadRequest, err: err})
		return nil
	}
	if err := s.pending.first(req.Server.ID+"/"+req.UserNkey, time.Unix(req.Expires, 0)); err != nil {
		reason := ReasonReplayed
		if !errors.Is(err, errReplayed) {
			reason = ReasonInternal
		}
		d := decision{reason: reason, err: err}
		s.record(req, d)
		return s.respond(req, "", d, serverXKey)
	}
	user, d := s.decide(ctx, req)
	s.record(req, d)
	return s.respond(req, user, d, serverXKey)
}

// request opens and checks an authorization request as the protocol
// requires: signed by a server key, by the server it names, for this
// issuer, not expired, encrypted exactly when an xkey is configured.
func (s *Service) request(data []byte, serverXKey string) (*jwt.AuthorizationRequestClaims, error) {
	switch {
	case s.cfg.XKey != nil && serverXKey == "":
		return nil, errors.New("the request is not encrypted but the callout has an xkey: configure the same xkey in auth_callout")
	case s.cfg.XKey == nil && serverXKey != "":
		return nil, errors.New("the server encrypts requests (auth_callout xkey) but the callout has no xkey seed")
	case s.cfg.XKey != nil:
		clear, err := s.cfg.XKey.Open(data, serverXKey)
		if err != nil {
			return nil, fmt.Errorf("decrypt the request from %s: %w", serverXKey, err)
		}
		data = clear
	}
	// Decoding verifies the signature against the issuer, which must be a
	// server key.
	req, err := jwt.DecodeAuthorizationRequestClaims(string(data))
	if err != nil {
		return nil, fmt.Errorf("decode the authorization request: %w", err)
	}
	vr := jwt.CreateValidationResults()
	req.Validate(vr)
	if err := blocking(vr); err != nil {
		return nil, fmt.Errorf("invalid authorization request from %s: %w", req.Issuer, err)
	}
	switch {
	case req.Expires == 0:
		// Without an expiry, a captured request could be replayed forever.
		return nil, fmt.Errorf("authorization request from %s has no expiry", req.Issuer)
	case req.Issuer != req.Server.ID:
		return nil, fmt.Errorf("authorization request signed by %s for server %s", req.Issuer, req.Server.ID)
	case req.Audience != server.AuthRequestSubject:
		return nil, fmt.Errorf("authorization request from %s has audience %q, not %q", req.Issuer, req.Audience, server.AuthRequestSubject)
	case req.Subject != s.issuerPub:
		return nil, fmt.Errorf("authorization request from %s is for issuer %s, not %s: check auth_callout issuer", req.Issuer, req.Subject, s.issuerPub)
	case s.cfg.XKey != nil && req.Server.XKey != serverXKey:
		return nil, fmt.Errorf("authorization request from %s: the xkey header %s is not the signed server xkey %s", req.Issuer, serverXKey, req.Server.XKey)
	}
	return req, nil
}

// decide verifies the connect token and returns the signed user JWT of
// its node, or why not.
func (s *Service) decide(ctx context.Context, req *jwt.AuthorizationRequestClaims) (string, decision) {
	tok := req.ConnectOptions.Token
	switch {
	case tok == "":
		return "", decision{reason: ReasonNoToken, err: errors.New("no token in the connect: a worker connects with its projected ServiceAccount token")}
	case len(tok) > MaxTokenSize:
		return "", decision{reason: ReasonTokenTooLarge, err: fmt.Errorf("token of %d bytes (at most %d)", len(tok), MaxTokenSize)}
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.ReviewTimeout)
	rv, err := s.cfg.Reviewer.Review(rctx, tok, s.cfg.Audience)
	cancel()
	d := decision{review: rv}
	switch {
	case errors.Is(err, ErrNotAuthenticated):
		d.reason, d.err = ReasonNotAuthenticated, err
	case errors.Is(err, ErrRateLimited):
		d.reason, d.err = ReasonRateLimited, err
	case err != nil:
		d.reason, d.err = ReasonReviewFailed, err
	case !slices.Contains(rv.Audiences, s.cfg.Audience):
		d.reason, d.err = ReasonNotAuthenticated, fmt.Errorf("the token is not valid for audience %s (valid for %v)", s.cfg.Audience, rv.Audiences)
	case rv.Username != s.username:
		d.reason, d.err = ReasonWrongServiceAccount, fmt.Errorf("user %s is not %s", rv.Username, s.username)
	case rv.Node() == "":
		d.reason, d.err = ReasonNoNode, fmt.Errorf("the token of %s is not bound to a pod on a node (no %s): mount a projected token", rv.Username, NodeNameExtra)
	case len(validation.IsDNS1123Subdomain(rv.Node())) > 0:
		d.reason, d.err = ReasonNoNode, fmt.Errorf("%s %q is not a node name", NodeNameExtra, rv.Node())
	case rv.Expiry.IsZero():
		d.reason, d.err = ReasonNoExpiry, fmt.Errorf("the token of %s has no expiry", rv.Username)
	}
	if d.err != nil {
		return "", d
	}
	d.node = rv.Node()
	now := time.Now()
	exp := rv.Expiry
	if limit := now.Add(s.cfg.MaxTTL); limit.Before(exp) {
		exp = limit
	}
	if exp.Unix() <= now.Unix() {
		d.reason, d.err = ReasonNotAuthenticated, fmt.Errorf("the token of %s expires at %s", rv.Username, rv.Expiry.UTC().Format(time.RFC3339))
		return "", d
	}
	// Server configuration mode places the user in the account its
	// audience names: the one the streams are in, or its node's own.
	account := s.account()
	perms := natsauth.WorkerPermissions(d.node, s.cfg.Streams, s.cfg.SharedInbox, s.cfg.WorkerExtraPublish...)
	if s.cfg.NodeAccounts != nil {
		if !s.hasNodeAccount(d.node) {
			d.reason, d.err = ReasonNoNodeAccount, fmt.Errorf("node %s has no account of its own in the NATS configuration: regenerate it with the node (switchback nats-auth --callout --node-accounts --node ...) and reload NATS", d.node)
			return "", d
		}
		account, perms = natsauth.NodeAccount(s.cfg.Account, d.node), natsauth.NodeWorkerPermissions(perms)
	}
	uc := jwt.NewUserClaims(req.UserNkey)
	uc.Name = natsauth.WorkerUser(d.node)
	uc.Audience = account
	uc.Expires = exp.Unix()
	uc.Permissions = JWTPermissions(perms)
	uc.AllowedConnectionTypes = jwt.StringList{jwt.ConnectionTypeStandard}
	vr := jwt.CreateValidationResults()
	uc.Validate(vr)
	if err := blocking(vr); err != nil {
		d.reason, d.err = ReasonInternal, fmt.Errorf("user of node %s: %w", d.node, err)
		return "", d
	}
	user, err := uc.Encode(s.cfg.Issuer)
	if err != nil {
		d.reason, d.err = ReasonInternal, fmt.Errorf("sign the user of node %s: %w", d.node, err)
		return "", d
	}
	d.reason = ReasonAllowed
	return user, d
}

// respond signs (and, with an xkey, encrypts) the response to req: user,
// or d's refusal when user is empty.
func (s *Service) respond(req *jwt.AuthorizationRequestClaims, user string, d decision, serverXKey string) []byte {
	rc := jwt.NewAuthorizationResponseClaims(req.UserNkey)
	rc.Audience = req.Server.ID
	if user != "" {
		rc.Jwt = user
	} else {
		rc.Error = "switchback: " + d.reason + ": " + d.err.Error()
	}
	tok, err := rc.Encode(s.cfg.Issuer)
	if err != nil {
		s.record(req, decision{reason: ReasonInternal, err: fmt.Errorf("sign the response: %w", err), node: d.node})
		return nil
	}
	if s.cfg.XKey == nil {
		return []byte(tok)
	}
	sealed, err := s.cfg.XKey.Seal([]byte(tok), serverXKey)
	if err != nil {
		s.record(req, decision{reason: ReasonInternal, err: fmt.Errorf("encrypt the response to %s: %w", serverXKey, err), node: d.node})
		return nil
	}
	return sealed
}

// record logs and counts a decision. The token is never logged.
func (s *Service) record(req *jwt.AuthorizationRequestClaims, d decision) {
	metrics.NATSCalloutDecisions.WithLabelValues(d.reason).Inc()
	attrs := []any{"reason", d.reason}
	if d.node != "" || d.review.Node() != "" {
		attrs = append(attrs, "node", cmp.Or(d.node, d.review.Node()))
	}
	if d.review.Username != "" {
		attrs = append(attrs, "user", d.review.Username)
	}
	if pod := d.review.Extra[PodNameExtra]; len(pod) == 1 {
		attrs = append(attrs, "pod", pod[0])
	}
	if req != nil {
		ci := req.ClientInformation
		attrs = append(attrs, "server", req.Server.Name, "client_host", ci.Host, "client_name", ci.Name, "client_kind", ci.Kind)
	}
	switch d.reason {
	case ReasonAllowed:
		s.log.Info("NATS auth callout admitted a worker", attrs...)
	case ReasonReviewFailed, ReasonInternal:
		s.log.Error("NATS auth callout refused a connection", append(attrs, "error", d.err)...)
	default:
		s.log.Warn("NATS auth callout refused a connection", append(attrs, "error", d.err)...)
	}
}

// blocking returns the issues of vr that make a claim unusable, expiry
// included (vr.Errors leaves time checks out), nil when there are none.
func blocking(vr *jwt.ValidationResults) error {
	var errs []error
	for _, i := range vr.Issues {
		if i.Blocking || i.TimeCheck {
			errs = append(errs, i)
		}
	}
	return errors.Join(errs...)
}

// JWTPermissions converts natsauth's permissions into a user JWT's.
func JWTPermissions(p natsauth.Permissions) jwt.Permissions {
	return jwt.Permissions{
		Pub: jwt.Permission{Allow: slices.Clone(p.PublishAllow), Deny: slices.Clone(p.PublishDeny)},
		Sub: jwt.Permission{Allow: slices.Clone(p.SubscribeAllow), Deny: slices.Clone(p.SubscribeDeny)},
	}
}

var errReplayed = errors.New("this authorization request was already answered")

// replays remembers the requests answered, until they expire.
type replays struct {
	mu   sync.Mutex
	seen map[string]time.Time
	max  int
}

// first records key until exp, or returns errReplayed when it is there
// already. It fails closed when it is full of live entries.
func (r *replays) first(key string, exp time.Time) error {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if until, ok := r.seen[key]; ok && now.Before(until) {
		return errReplayed
	}
	if len(r.seen) >= r.max {
		for k, until := range r.seen {
			if !now.Before(until) {
				delete(r.seen, k)
			}
		}
		if len(r.seen) >= r.max {
			return fmt.Errorf("%d authorization requests pending: refusing more", len(r.seen))
		}
	}
	// A second of slack: expiries are whole seconds.
	r.seen[key] = exp.Add(time.Second)
	return nil
}

// hasNodeAccount reports whether the server's configuration holds node's
// account, reading the list again (Config.ReadNodeAccounts) before it
// answers no.
func (s *Service) hasNodeAccount(node string) bool {
	if slices.Contains(*s.nodeAccounts.Load(), node) {
		return true
	}
	if s.cfg.ReadNodeAccounts == nil {
		return false
	}
	nodes, err := s.cfg.ReadNodeAccounts()
	switch {
	case err != nil:
		s.log.Error("reading the nodes' accounts again", "node", node, "error", err)
		return false
	case nodes == nil:
		s.log.Error("reading the nodes' accounts again: the keys no longer list node accounts; restart the controller to change the layout", "node", node)
		return false
	}
	nodes = slices.Clone(nodes)
	if old := s.nodeAccounts.Swap(&nodes); !slices.Equal(*old, nodes) {
		s.log.Info("the nodes' accounts changed", "nodes", nodes)
	}
	return slices.Contains(nodes, node)
}
