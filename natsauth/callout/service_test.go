package callout

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"
	"k8s.io/client-go/rest"

	"github.com/switchback-dev/switchback/metrics"
	"github.com/switchback-dev/switchback/natsauth"
)

const (
	testNamespace = "longhorn-system"
	workerUser    = "system:serviceaccount:longhorn-system:switchback-worker"
	secretToken   = "the-worker-token-must-never-be-logged"
)

// fakeReviewer answers every review with review or err, and counts calls.
type fakeReviewer struct {
	mu     sync.Mutex
	calls  int
	review Review
	err    error
}

func (f *fakeReviewer) Review(_ context.Context, _, _ string) (Review, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return f.review, f.err
}

func (f *fakeReviewer) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func workerReview(node string, exp time.Time) Review {
	return Review{
		Username:  workerUser,
		Extra:     map[string][]string{NodeNameExtra: {node}, PodNameExtra: {"switchback-worker-" + node}},
		Audiences: []string{DefaultAudience},
		Expiry:    exp,
	}
}

// fakeServer plays nats-server's side of the protocol: it signs requests
// with a server key and opens the answers.
type fakeServer struct {
	kp  nkeys.KeyPair
	id  string
	xkp nkeys.KeyPair
}

func newFakeServer(t *testing.T) *fakeServer {
	t.Helper()
	kp, err := nkeys.CreateServer()
	require.NoError(t, err)
	id, err := kp.PublicKey()
	require.NoError(t, err)
	xkp, err := nkeys.CreateCurveKeys()
	require.NoError(t, err)
	return &fakeServer{kp: kp, id: id, xkp: xkp}
}

// claims is a request as nats-server builds it for a client connecting
// with token, to the callout of issuer.
func (f *fakeServer) claims(t *testing.T, issuer, token string) *jwt.AuthorizationRequestClaims {
	t.Helper()
	c := jwt.NewAuthorizationRequestClaims(issuer)
	c.Audience = server.AuthRequestSubject
	ukp, err := nkeys.CreateUser()
	require.NoError(t, err)
	c.UserNkey, err = ukp.PublicKey()
	require.NoError(t, err)
	c.Server = jwt.ServerID{Name: "fake", ID: f.id}
	c.ClientInformation = jwt.ClientInformation{Host: "10.0.0.7", Name: "switchback-worker", Kind: "Client"}
	c.ConnectOptions.Token = token
	c.Expires = time.Now().Add(2 * time.Second).Unix()
	return c
}

func encode(t *testing.T, c *jwt.AuthorizationRequestClaims, signer nkeys.KeyPair) []byte {
	t.Helper()
	s, err := c.Encode(signer)
	require.NoError(t, err)
	return []byte(s)
}

// fixture is a Service on a fake reviewer, logging into a buffer.
type fixture struct {
	svc      *Service
	reviewer *fakeReviewer
	issuer   string
	xkey     string
	logs     *bytes.Buffer
}

func newFixture(t *testing.T, mod func(*Config)) *fixture {
	t.Helper()
	issuer, err := nkeys.CreateAccount()
	require.NoError(t, err)
	pub, err := issuer.PublicKey()
	require.NoError(t, err)
	f := &fixture{reviewer: &fakeReviewer{}, issuer: pub, logs: &bytes.Buffer{}}
	cfg := Config{Issuer: issuer, Reviewer: f.reviewer, Namespace: testNamespace,
		Log: slog.New(slog.NewTextHandler(f.logs, nil))}
	if mod != nil {
		mod(&cfg)
	}
	if cfg.XKey != nil {
		f.xkey, err = cfg.XKey.PublicKey()
		require.NoError(t, err)
	}
	f.svc, err = New(cfg)
	require.NoError(t, err)
	return f
}

// response decodes a signed response and checks what the server checks:
// signed by the issuer, for the user and the server of the request.
func (f *fixture) response(t *testing.T, reply []byte, req *jwt.AuthorizationRequestClaims) *jwt.AuthorizationResponseClaims {
	t.Helper()
	require.NotEmpty(t, reply, "a signed answer, not an empty reply")
	rc, err := jwt.DecodeAuthorizationResponseClaims(string(reply))
	require.NoError(t, err)
	vr := jwt.CreateValidationResults()
	rc.Validate(vr)
	require.Empty(t, vr.Errors())
	assert.Equal(t, f.issuer, rc.Issuer, "signed by the configured issuer")
	assert.Equal(t, req.UserNkey, rc.Subject, "for the user nkey the server asked about")
	assert.Equal(t, req.Server.ID, rc.Audience, "for the server that asked")
	return rc
}

func counter(reason string) float64 {
	var m dto.Metric
	if err := metrics.NATSCalloutDecisions.WithLabelValues(reason).Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

// TestDecisions: what a valid request gets, by what the apiserver said of
// its token.
func TestDecisions(t *testing.T) {
	srv := newFakeServer(t)
	tokenExp := time.Now().Add(10 * time.Minute).Truncate(time.Second)
	cases := []struct {
		name   string
		token  string
		review Review
		err    error
		maxTTL time.Duration
		reason string
		node   string
		expiry time.Time // allowed: the user's expiry, to the second
	}{
		{name: "worker of n1", token: secretToken, review: workerReview("n1", tokenExp), reason: ReasonAllowed, node: "n1", expiry: tokenExp},
		{name: "worker of n2", token: secretToken, review: workerReview("n2", tokenExp), reason: ReasonAllowed, node: "n2", expiry: tokenExp},
		{name: "capped by MaxTTL", token: secretToken, review: workerReview("n1", tokenExp), maxTTL: time.Minute, reason: ReasonAllowed, node: "n1"},
		{name: "no token", reason: ReasonNoToken},
		{name: "token too large", token: strings.Repeat("x", MaxTokenSize+1), reason: ReasonTokenTooLarge},
		{name: "not authenticated", token: secretToken, err: fmt.Errorf("%w: invalid bearer token", ErrNotAuthenticated), reason: ReasonNotAuthenticated},
		{name: "apiserver down", token: secretToken, err: errors.New("dial tcp 10.0.0.1:443: connect: connection refused"), reason: ReasonReviewFailed},
		{name: "rate-limited", token: secretToken, err: fmt.Errorf("callout: %w: %w", ErrRateLimited, context.DeadlineExceeded), reason: ReasonRateLimited},
		{name: "other audience", token: secretToken, review: func() Review {
			r := workerReview("n1", tokenExp)
			r.Audiences = []string{"https://kubernetes.default.svc"}
			return r
		}(), reason: ReasonNotAuthenticated},
		{name: "other service account", token: secretToken, review: func() Review {
			r := workerReview("n1", tokenExp)
			r.Username = "system:serviceaccount:longhorn-system:default"
			return r
		}(), reason: ReasonWrongServiceAccount},
		{name: "not bound to a node", token: secretToken, review: Review{Username: workerUser, Audiences: []string{DefaultAudience}, Expiry: tokenExp}, reason: ReasonNoNode},
		{name: "not a node name", token: secretToken, review: workerReview("N1 >", tokenExp), reason: ReasonNoNode},
		{name: "no expiry", token: secretToken, review: workerReview("n1", time.Time{}), reason: ReasonNoExpiry},
		{name: "expired", token: secretToken, review: workerReview("n1", time.Now().Add(-time.Second)), reason: ReasonNotAuthenticated},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(c *Config) { c.MaxTTL = tc.maxTTL })
			f.reviewer.review, f.reviewer.err = tc.review, tc.err
			before := counter(tc.reason)
			req := srv.claims(t, f.issuer, tc.token)
			now := time.Now()
			rc := f.response(t, f.svc.answer(context.Background(), encode(t, req, srv.kp), ""), req)
			assert.Equal(t, before+1, counter(tc.reason), "counted as %s", tc.reason)
			assert.NotContains(t, f.logs.String(), secretToken, "the token is never logged")
			assert.Contains(t, f.logs.String(), "reason="+tc.reason)
			if tc.reason != ReasonAllowed {
				assert.Empty(t, rc.Jwt)
				assert.Contains(t, rc.Error, tc.reason, "the refusal says why")
				assert.NotContains(t, rc.Error, secretToken)
				return
			}
			require.Empty(t, rc.Error)
			uc, err := jwt.DecodeUserClaims(rc.Jwt)
			require.NoError(t, err)
			assert.Equal(t, f.issuer, uc.Issuer)
			assert.Equal(t, req.UserNkey, uc.Subject)
			assert.Equal(t, server.DEFAULT_GLOBAL_ACCOUNT, uc.Audience, "placed in the global account")
			assert.Equal(t, natsauth.WorkerUser(tc.node), uc.Name)
			assert.Equal(t, JWTPermissions(natsauth.WorkerPermissions(tc.node, natsauth.Streams{}, false)), uc.Permissions,
				"exactly the node's worker permissions")
			assert.Equal(t, jwt.StringList{jwt.ConnectionTypeStandard}, uc.AllowedConnectionTypes)
			assert.LessOrEqual(t, uc.Expires, tokenExp.Unix(), "never outlives the token")
			if tc.expiry.IsZero() {
				assert.InDelta(t, now.Add(tc.maxTTL).Unix(), uc.Expires, 2, "capped at MaxTTL")
			} else {
				assert.Equal(t, tc.expiry.Unix(), uc.Expires, "expires with the token")
			}
			assert.Contains(t, f.logs.String(), "node="+tc.node)
		})
	}
}

// TestBadRequests: requests that are not a current request of the server
// that sent them get an empty reply (the server refuses: "no reason
// supplied"), and are counted and logged.
func TestBadRequests(t *testing.T) {
	srv := newFakeServer(t)
	other := newFakeServer(t)
	account, err := nkeys.CreateAccount()
	require.NoError(t, err)
	cases := []struct {
		name   string
		build  func(f *fixture) []byte
		header string
		want   string
	}{
		{name: "garbage", build: func(*fixture) []byte { return []byte("not a jwt") }, want: "decode"},
		{name: "a user JWT, not a request", build: func(f *fixture) []byte {
			uc := jwt.NewUserClaims(srv.claims(t, f.issuer, secretToken).UserNkey)
			s, err := uc.Encode(account)
			require.NoError(t, err)
			return []byte(s)
		}, want: "decode"},
		{name: "signed by another server", build: func(f *fixture) []byte {
			return encode(t, srv.claims(t, f.issuer, secretToken), other.kp)
		}, want: "signed by " + other.id},
		{name: "expired", build: func(f *fixture) []byte {
			c := srv.claims(t, f.issuer, secretToken)
			c.Expires = time.Now().Add(-2 * time.Second).Unix()
			return encode(t, c, srv.kp)
		}, want: "expired"},
		{name: "no expiry", build: func(f *fixture) []byte {
			c := srv.claims(t, f.issuer, secretToken)
			c.Expires = 0
			return encode(t, c, srv.kp)
		}, want: "no expiry"},
		{name: "other audience", build: func(f *fixture) []byte {
			c := srv.claims(t, f.issuer, secretToken)
			c.Audience = "something-else"
			return encode(t, c, srv.kp)
		}, want: "audience"},
		{name: "for another issuer", build: func(*fixture) []byte {
			pub, err := account.PublicKey()
			require.NoError(t, err)
			return encode(t, srv.claims(t, pub, secretToken), srv.kp)
		}, want: "check auth_callout issuer"},
		{name: "encrypted, but no xkey configured", build: func(f *fixture) []byte {
			return encode(t, srv.claims(t, f.issuer, secretToken), srv.kp)
		}, header: "XAAAA", want: "no xkey seed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			f.reviewer.review = workerReview("n1", time.Now().Add(time.Hour))
			before := counter(ReasonBadRequest)
			reply := f.svc.answer(context.Background(), tc.build(f), tc.header)
			assert.Empty(t, reply, "no signed answer for a request that cannot be trusted")
			assert.Equal(t, before+1, counter(ReasonBadRequest))
			assert.Contains(t, f.logs.String(), tc.want)
			assert.Zero(t, f.reviewer.count(), "the token is not even looked at")
			assert.NotContains(t, f.logs.String(), secretToken)
		})
	}
}

// TestReplayedRequest: a request answered once is refused when sent again,
// with a signed error; the token is not reviewed again.
func TestReplayedRequest(t *testing.T) {
	srv := newFakeServer(t)
	f := newFixture(t, nil)
	f.reviewer.review = workerReview("n1", time.Now().Add(time.Hour))
	req := srv.claims(t, f.issuer, secretToken)
	data := encode(t, req, srv.kp)
	first := f.response(t, f.svc.answer(context.Background(), data, ""), req)
	require.NotEmpty(t, first.Jwt)
	before := counter(ReasonReplayed)
	again := f.response(t, f.svc.answer(context.Background(), data, ""), req)
	assert.Empty(t, again.Jwt)
	assert.Contains(t, again.Error, ReasonReplayed)
	assert.Equal(t, before+1, counter(ReasonReplayed))
	assert.Equal(t, 1, f.reviewer.count())

	// The memory of answered requests is bounded and fails closed.
	r := &replays{seen: map[string]time.Time{}, max: 2}
	exp := time.Now().Add(time.Minute)
	require.NoError(t, r.first("a", exp))
	require.NoError(t, r.first("b", exp))
	require.ErrorIs(t, r.first("a", exp), errReplayed)
	require.ErrorContains(t, r.first("c", exp), "pending")
	require.NoError(t, (&replays{seen: map[string]time.Time{"old": time.Now().Add(-time.Second)}, max: 1}).first("c", exp),
		"expired entries make room")
}

// TestEncryptedRequests: with an xkey, requests are opened with it and the
// answers sealed to the server's xkey; a request in clear, or whose header
// names another xkey than the signed request, is refused.
func TestEncryptedRequests(t *testing.T) {
	srv := newFakeServer(t)
	xkp, err := nkeys.CreateCurveKeys()
	require.NoError(t, err)
	f := newFixture(t, func(c *Config) { c.XKey = xkp })
	f.reviewer.review = workerReview("n1", time.Now().Add(time.Hour))
	srvX, err := srv.xkp.PublicKey()
	require.NoError(t, err)

	seal := func(c *jwt.AuthorizationRequestClaims) []byte {
		sealed, err := srv.xkp.Seal(encode(t, c, srv.kp), f.xkey)
		require.NoError(t, err)
		return sealed
	}
	req := srv.claims(t, f.issuer, secretToken)
	req.Server.XKey = srvX
	reply := f.svc.answer(context.Background(), seal(req), srvX)
	require.False(t, bytes.HasPrefix(reply, []byte("eyJ")), "the answer is not in clear")
	opened, err := srv.xkp.Open(reply, f.xkey)
	require.NoError(t, err, "sealed to the server's xkey")
	require.NotEmpty(t, f.response(t, opened, req).Jwt)

	before := counter(ReasonBadRequest)
	clear := srv.claims(t, f.issuer, secretToken)
	assert.Empty(t, f.svc.answer(context.Background(), encode(t, clear, srv.kp), ""), "a request in clear")
	swapped := srv.claims(t, f.issuer, secretToken)
	swapped.Server.XKey = srvX
	other, err := nkeys.CreateCurveKeys()
	require.NoError(t, err)
	otherX, err := other.PublicKey()
	require.NoError(t, err)
	sealed, err := other.Seal(encode(t, swapped, srv.kp), f.xkey)
	require.NoError(t, err)
	assert.Empty(t, f.svc.answer(context.Background(), sealed, otherX), "an xkey header that is not the signed one")
	assert.Equal(t, before+2, counter(ReasonBadRequest))
	assert.Contains(t, f.logs.String(), "not the signed server xkey")
}

// TestCache: one TokenReview per token while it is cached, a refusal kept
// for its own short time, no failure kept, never past the token's expiry,
// and a bounded size.
func TestCache(t *testing.T) {
	ctx := context.Background()
	r := &fakeReviewer{review: workerReview("n1", time.Now().Add(time.Hour))}
	c := NewCache(r, time.Minute, time.Minute, 2)
	for range 3 {
		_, err := c.Review(ctx, "t1", DefaultAudience)
		require.NoError(t, err)
	}
	assert.Equal(t, 1, r.count(), "cached")
	_, err := c.Review(ctx, "t1", "another-audience")
	require.NoError(t, err)
	assert.Equal(t, 2, r.count(), "keyed by audience too")

	r.err = errors.New("apiserver down")
	_, err = c.Review(ctx, "t2", DefaultAudience)
	require.Error(t, err)
	_, err = c.Review(ctx, "t2", DefaultAudience)
	require.Error(t, err)
	assert.Equal(t, 4, r.count(), "failures are not cached")

	r.err = nil
	r.review = workerReview("n1", time.Now().Add(-time.Second))
	for range 2 {
		_, err = c.Review(ctx, "t3", DefaultAudience)
		require.NoError(t, err)
	}
	assert.Equal(t, 6, r.count(), "an expired token is not served from the cache")
	assert.LessOrEqual(t, len(c.(*cache).entries), 2, "bounded")

	r.err = fmt.Errorf("%w: garbage", ErrNotAuthenticated)
	for range 3 {
		_, err = c.Review(ctx, "bogus", DefaultAudience)
		assert.ErrorIs(t, err, ErrNotAuthenticated)
	}
	assert.Equal(t, 7, r.count(), "a refusal is kept: a repeated bogus token costs one review")
	short := NewCache(r, time.Minute, 0, 2)
	for range 2 {
		_, err = short.Review(ctx, "bogus", DefaultAudience)
		assert.ErrorIs(t, err, ErrNotAuthenticated)
	}
	assert.Equal(t, 9, r.count(), "no refusal kept with a zero refusal time")
}

// TestRateLimited: reviews beyond the rate wait for their turn until their
// context ends, then fail as rate-limited (a failure to verify, never a
// refusal of the token) without reaching the apiserver (TestDecisions:
// the callout's reason says so).
func TestRateLimited(t *testing.T) {
	r := &fakeReviewer{review: workerReview("n1", time.Now().Add(time.Hour))}
	l := NewRateLimited(r, rate.Every(time.Hour), 2)
	for range 2 {
		_, err := l.Review(context.Background(), "t", DefaultAudience)
		require.NoError(t, err, "within the burst")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := l.Review(ctx, "t", DefaultAudience)
	assert.ErrorIs(t, err, ErrRateLimited)
	assert.NotErrorIs(t, err, ErrNotAuthenticated)
	assert.Equal(t, 2, r.count(), "the apiserver is not asked")
}

// TestTokenExpiry reads exp from a JWT payload.
func TestTokenExpiry(t *testing.T) {
	tok := func(payload string) string {
		return "e30." + base64.RawURLEncoding.EncodeToString([]byte(payload)) + ".c2ln"
	}
	exp, err := tokenExpiry(tok(`{"exp":1900000000,"aud":["switchback-nats"]}`))
	require.NoError(t, err)
	assert.Equal(t, time.Unix(1900000000, 0), exp)
	exp, err = tokenExpiry(tok(`{"sub":"x"}`))
	require.NoError(t, err)
	assert.True(t, exp.IsZero())
	_, err = tokenExpiry("garbage")
	assert.Error(t, err)
	_, err = tokenExpiry(tok(`not json`))
	assert.Error(t, err)
}

// TestNewRefusesBadKeys: the issuer must be an account seed, the xkey a
// curve seed.
func TestNewRefusesBadKeys(t *testing.T) {
	user, err := nkeys.CreateUser()
	require.NoError(t, err)
	account, err := nkeys.CreateAccount()
	require.NoError(t, err)
	pub, err := account.PublicKey()
	require.NoError(t, err)
	public, err := nkeys.FromPublicKey(pub)
	require.NoError(t, err)
	r := &fakeReviewer{}
	for name, cfg := range map[string]Config{
		"user key as issuer":   {Issuer: user, Reviewer: r, Namespace: testNamespace},
		"public key as issuer": {Issuer: public, Reviewer: r, Namespace: testNamespace},
		"account key as xkey":  {Issuer: account, XKey: account, Reviewer: r, Namespace: testNamespace},
		"no reviewer":          {Issuer: account, Namespace: testNamespace},
		"no namespace":         {Issuer: account, Reviewer: r},
		"no issuer at all":     {Reviewer: r, Namespace: testNamespace},
	} {
		_, err := New(cfg)
		assert.Error(t, err, name)
	}
}

// TestClusterReviewerFlood: the controller's reviewer asks the apiserver
// on a client of its own (its user agent), and a flood of connects with
// bogus tokens reaches it at most at the review rate: the same bogus token
// once per refusal time, distinct ones no faster than ReviewRate after the
// burst, the others failing as rate-limited within their timeout.
func TestClusterReviewerFlood(t *testing.T) {
	var mu sync.Mutex
	var asked int
	agents := map[string]bool{}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked++
		agents[r.UserAgent()] = true
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","status":{"authenticated":false,"error":"invalid bearer token"}}`)
	}))
	defer api.Close()
	rv, err := ClusterReviewer(&rest.Config{Host: api.URL})
	require.NoError(t, err)

	// A timeout shorter than the rate's interval: a review past the burst
	// fails at once instead of waiting for its turn.
	review := func(token string) error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second/time.Duration(ReviewRate)/2)
		defer cancel()
		_, err := rv.Review(ctx, token, DefaultAudience)
		return err
	}
	for range 50 {
		assert.ErrorIs(t, review("the-same-bogus-token"), ErrNotAuthenticated)
	}
	mu.Lock()
	assert.Equal(t, 1, asked, "a repeated bogus token is reviewed once while its refusal is kept")
	mu.Unlock()

	start := time.Now()
	var limited int
	const flood = 400
	for i := range flood {
		err := review(fmt.Sprintf("bogus-%d", i))
		switch {
		case errors.Is(err, ErrRateLimited):
			limited++
		case errors.Is(err, ErrNotAuthenticated):
		case errors.Is(err, context.DeadlineExceeded):
			// Let through, but its timeout ran out on the way to the
			// apiserver: a loaded machine's scheduling, not the limit.
		default:
			t.Fatalf("review %d: %v, want a refusal or a rate limit", i, err)
		}
	}
	elapsed := time.Since(start)
	mu.Lock()
	defer mu.Unlock()
	bound := 1 + ReviewBurst + int(float64(ReviewRate)*elapsed.Seconds()) + 1
	assert.LessOrEqual(t, asked, bound, "at most the burst and the rate over %s", elapsed)
	assert.GreaterOrEqual(t, limited, flood-bound, "every review past the rate failed as rate-limited")
	assert.Equal(t, map[string]bool{"switchback-nats-callout": true}, agents, "on a client of its own")
}
