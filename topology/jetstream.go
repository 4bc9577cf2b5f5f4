package topology

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
