package callout

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authnv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	"k8s.io/client-go/rest"
)

// NodeNameExtra is the user extra the apiserver sets on a ServiceAccount
// token bound to a pod that is bound to a node: the node's name. Tokens
// without it (not bound to a pod, or to a pod not yet scheduled) are refused.
const NodeNameExtra = "authentication.kubernetes.io/node-name"

// PodNameExtra is the user extra naming the pod a token is bound to; logged.
const PodNameExtra = "authentication.kubernetes.io/pod-name"

// ErrNotAuthenticated is returned (wrapped, with the apiserver's reason) by
// a TokenReviewer when the apiserver answered that the token is not valid
// for the audience: garbage, expired, another audience, a deleted pod.
var ErrNotAuthenticated = errors.New("token not authenticated")

// Review is what the apiserver vouched for about a token.
type Review struct {
	// Username is the authenticated user, e.g.
	// system:serviceaccount:longhorn-system:switchback-worker.
	Username string
	// Extra holds the user extras (NodeNameExtra, PodNameExtra, ...).
	Extra map[string][]string
	// Audiences are the audiences the token is valid for, of those asked.
	Audiences []string
	// Expiry is the token's own expiry (its exp claim); zero when it has none.
	Expiry time.Time
}

// Node returns the node the token is bound to, "" when none.
func (r Review) Node() string {
	if v := r.Extra[NodeNameExtra]; len(v) == 1 {
		return v[0]
	}
	return ""
}

// TokenReviewer verifies a token for one audience. An error wrapping
// ErrNotAuthenticated means the token is not valid; any other error means
// it could not be verified (the apiserver is down, the reviewer is not
// allowed to review).
type TokenReviewer interface {
	Review(ctx context.Context, token, audience string) (Review, error)
}

// KubeReviewer verifies tokens with the Kubernetes TokenReview API. Its
// identity needs `create` on `tokenreviews` (authentication.k8s.io).
type KubeReviewer struct {
	// TokenReviews is clientset.AuthenticationV1().TokenReviews().
	TokenReviews authnv1client.TokenReviewInterface
}

// Review implements TokenReviewer.
func (k KubeReviewer) Review(ctx context.Context, token, audience string) (Review, error) {
	tr, err := k.TokenReviews.Create(ctx, &authnv1.TokenReview{
		Spec: authnv1.TokenReviewSpec{Token: token, Audiences: []string{audience}},
	}, metav1.CreateOptions{})
	if err != nil {
		return Review{}, fmt.Errorf("callout: create tokenreview (audience %s): %w", audience, err)
	}
	st := tr.Status
	if !st.Authenticated {
		return Review{}, fmt.Errorf("%w for audience %s: %s", ErrNotAuthenticated, audience, st.Error)
	}
	extra := make(map[string][]string, len(st.User.Extra))
	for k, v := range st.User.Extra {
		extra[k] = v
	}
	// The apiserver has just verified the token's signature: reading its
	// payload here only recovers the expiry, which TokenReview omits.
	exp, err := tokenExpiry(token)
	if err != nil {
		return Review{}, err
	}
	return Review{Username: st.User.Username, Extra: extra, Audiences: st.Audiences, Expiry: exp}, nil
}

// tokenExpiry reads the exp claim of a JWT whose signature was verified
// elsewhere. Zero when the token has none.
func tokenExpiry(token string) (time.Time, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, errors.New("callout: the token is not a JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, fmt.Errorf("callout: token payload: %w", err)
	}
	var claims struct {
		Exp int64 `json:"exp"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		return time.Time{}, fmt.Errorf("callout: token claims: %w", err)
	}
	if claims.Exp == 0 {
		return time.Time{}, nil
	}
	return time.Unix(claims.Exp, 0), nil
}

// NewCache wraps r with a cache of reviews, keyed by a hash of the audience
// and the token (the token itself is not kept), holding at most size
// entries. A success is kept for ttl and never past the token's expiry:
// many workers reconnecting at once (a NATS restart) then cost one
// TokenReview per token, and an apiserver blip shorter than ttl refuses
// nobody who connected just before. A revoked token (its pod deleted) is
// honoured for up to ttl: keep it short. A refusal (ErrNotAuthenticated) is
// kept for refusalTTL, so that a client repeating a bad token costs one
// TokenReview per refusalTTL, not one per connect; a token the apiserver
// would now accept waits that long. Failures (the apiserver unreachable)
// are not kept.
func NewCache(r TokenReviewer, ttl, refusalTTL time.Duration, size int) TokenReviewer {
	return &cache{next: r, ttl: ttl, refusalTTL: refusalTTL, size: size, entries: make(map[[sha256.Size]byte]cached)}
}

type cache struct {
	next       TokenReviewer
	ttl        time.Duration
	refusalTTL time.Duration
	size       int

	mu      sync.Mutex
	entries map[[sha256.Size]byte]cached
}

type cached struct {
	review Review
	err    error
	until  time.Time
}

func (c *cache) Review(ctx context.Context, token, audience string) (Review, error) {
	key := sha256.Sum256([]byte(audience + "\x00" + token))
	now := time.Now()
	c.mu.Lock()
	e, ok := c.entries[key]
	c.mu.Unlock()
	if ok && now.Before(e.until) {
		return e.review, e.err
	}
	r, err := c.next.Review(ctx, token, audience)
	until := now.Add(c.ttl)
	switch {
	case errors.Is(err, ErrNotAuthenticated):
		until = now.Add(c.refusalTTL)
	case err != nil:
		return r, err
	case !r.Expiry.IsZero() && r.Expiry.Before(until):
		until = r.Expiry
	}
	if !now.Before(until) {
		return r, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= c.size {
		for k, e := range c.entries {
			if !now.Before(e.until) {
				delete(c.entries, k)
			}
		}
	}
	// Still full of live entries: drop any one (map order); a miss costs
	// only a TokenReview.
	for k := range c.entries {
		if len(c.entries) < c.size {
			break
		}
		delete(c.entries, k)
	}
	if c.size > 0 {
		c.entries[key] = cached{review: r, err: err, until: until}
	}
	return r, err
}

// ErrRateLimited is returned (wrapped) by a rate-limited TokenReviewer
// when a review could not start before its context ended: a failure to
// verify, not a refusal of the token.
var ErrRateLimited = errors.New("token reviews rate-limited")

// NewRateLimited wraps r so that it starts at most limit reviews a second,
// with bursts of burst: a flood of connects with bogus tokens (each costs a
// TokenReview) then cannot take the apiserver's capacity, nor, on a client
// of their own, the controller's other requests (its leader lease). A
// review waits for its turn until ctx ends (the callout's timeout).
func NewRateLimited(r TokenReviewer, limit rate.Limit, burst int) TokenReviewer {
	return &rateLimited{next: r, limiter: rate.NewLimiter(limit, burst)}
}

type rateLimited struct {
	next    TokenReviewer
	limiter *rate.Limiter
}

func (l *rateLimited) Review(ctx context.Context, token, audience string) (Review, error) {
	if err := l.limiter.Wait(ctx); err != nil {
		return Review{}, fmt.Errorf("callout: %w: %w", ErrRateLimited, err)
	}
	return l.next.Review(ctx, token, audience)
}

// The controller's TokenReviewer (ClusterReviewer): successes kept 10 s,
// refusals 2 s, 4096 tokens at most; 20 reviews a second, bursts of 40,
// which a whole cluster's workers reconnecting at once (a NATS restart)
// stay within through the cache and their reconnect backoff.
const (
	ReviewCacheTTL  = 10 * time.Second
	RefusalCacheTTL = 2 * time.Second
	ReviewCacheSize = 4096
	ReviewRate      = rate.Limit(20)
	ReviewBurst     = 40
	reviewUserAgent = "switchback-nats-callout"
)

// ClusterReviewer is the callout's TokenReviewer against the cluster of
// cfg: KubeReviewer on a client of its own (its own client-side limits, so
// a flood of connects does not starve the controller's other requests),
// rate-limited and cached with the defaults above.
func ClusterReviewer(cfg *rest.Config) (TokenReviewer, error) {
	own := rest.CopyConfig(cfg)
	own.QPS, own.Burst = float32(ReviewRate)*2, ReviewBurst*2
	own.UserAgent = reviewUserAgent
	cs, err := authnv1client.NewForConfig(own)
	if err != nil {
		return nil, fmt.Errorf("callout: tokenreview client: %w", err)
	}
	return NewCache(NewRateLimited(KubeReviewer{TokenReviews: cs.TokenReviews()}, ReviewRate, ReviewBurst), ReviewCacheTTL, RefusalCacheTTL, ReviewCacheSize), nil
}
