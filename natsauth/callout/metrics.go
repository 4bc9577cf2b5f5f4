package callout

import "github.com/switchback-dev/switchback/metrics"

// Reasons label metrics.NATSCalloutDecisions and the refusal logs. They are stable: alerts
// may match on them.
const (
	// ReasonAllowed: the worker got its node's user.
	ReasonAllowed = "allowed"
	// ReasonBadRequest: the request is not a valid, current authorization
	// request of the server that sent it (undecodable, bad signature,
	// expired, server id mismatch, not encrypted as configured).
	ReasonBadRequest = "bad_request"
	// ReasonReplayed: a request already answered was sent again.
	ReasonReplayed = "replayed"
	// ReasonNoToken: the client presented no token.
	ReasonNoToken = "no_token"
	// ReasonTokenTooLarge: the token is larger than any ServiceAccount token.
	ReasonTokenTooLarge = "token_too_large"
	// ReasonNotAuthenticated: the apiserver says the token is not valid for
	// the audience (garbage, expired, other audience, its pod deleted).
	ReasonNotAuthenticated = "not_authenticated"
	// ReasonWrongServiceAccount: a valid token of another user.
	ReasonWrongServiceAccount = "wrong_service_account"
	// ReasonNoNode: a valid worker token not bound to a pod on a node.
	ReasonNoNode = "no_node"
	// ReasonNoExpiry: a valid token without an expiry: its user could
	// never be made to expire with it.
	ReasonNoExpiry = "no_expiry"
	// ReasonReviewFailed: the token could not be verified (apiserver down or
	// slow, the callout's identity may not create tokenreviews).
	ReasonReviewFailed = "review_failed"
	// ReasonRateLimited: the review could not start within the callout's
	// timeout, the TokenReviews being rate-limited (a flood of connects).
	ReasonRateLimited = "rate_limited"
	// ReasonNoNodeAccount: a worker of a node the server's configuration
	// has no account for (Config.NodeAccounts): regenerate it with the node
	// and reload NATS.
	ReasonNoNodeAccount = "no_node_account"
	// ReasonInternal: the answer could not be built (signing, encryption).
	ReasonInternal = "internal"
)

func init() {
	// Every series exists from the start, at zero: an alert on
	// review_failed can tell "none yet" from "not reporting".
	for _, r := range []string{ReasonAllowed, ReasonBadRequest, ReasonReplayed, ReasonNoToken, ReasonTokenTooLarge,
		ReasonNotAuthenticated, ReasonWrongServiceAccount, ReasonNoNode, ReasonNoExpiry, ReasonReviewFailed, ReasonRateLimited, ReasonNoNodeAccount, ReasonInternal} {
		metrics.NATSCalloutDecisions.WithLabelValues(r)
	}
}
