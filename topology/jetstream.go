package topology

import "strings"

// JetStream's own subjects, as the permissions name them.
const (
	// JSAPI prefixes every JetStream API request.
	JSAPI = "$JS.API."
	// AckPrefix prefixes the acknowledgement subjects of deliveries: a
	// delivery's reply is AckPrefix + "<stream>.<consumer>....".
	AckPrefix = "$JS.ACK."
	// EventPrefix prefixes JetStream's advisories and metrics.
	EventPrefix = "$JS.EVENT."
	// KVPrefix prefixes the keys of KV buckets.
	KVPrefix = "$KV."
	// InboxPrefix is where NATS clients receive replies by default
	// (nats.go's _INBOX); Switchback's users each get one under it.
	InboxPrefix = "_INBOX."
	// NodeAPIPrefix is where the imports of an account without JetStream
	// (a node's account, natsauth.Config.NodeAccounts) put the JetStream
	// API of the streams' account: apart from JSAPI, which such an account
	// imports from the system account, where it answers "JetStream not
	// enabled".
	NodeAPIPrefix = "$SB.API."
)

// Acks are the acknowledgement subjects of consumer's deliveries on stream.
func Acks(stream, consumer string) string { return AckPrefix + stream + "." + consumer + ".>" }

// MaxDeliveriesAdvisories: JetStream's advisories that a command of
// stream exhausted its deliveries, on any consumer.
func MaxDeliveriesAdvisories(stream string) string {
	return EventPrefix + "ADVISORY.CONSUMER.MAX_DELIVERIES." + stream + ".*"
}

// TerminatedAdvisories: JetStream's advisories that a consumer of stream
// terminated a message (a worker refusing a command it can never run).
func TerminatedAdvisories(stream string) string {
	return EventPrefix + "ADVISORY.CONSUMER.MSG_TERMINATED." + stream + ".*"
}

// APIPrefix is the API prefix a JetStream client configured with
// configured (its Options().APIPrefix) sends its requests under, ending in
// a dot (JSAPI when none is configured): a configured prefix may lack the
// dot, and requests built by hand append the API's tokens to it.
func APIPrefix(configured string) string {
	p := configured
	if p == "" {
		return JSAPI
	}
	if !strings.HasSuffix(p, ".") {
		p += "."
	}
	return p
}
