// Package events is Switchback's event catalogue: the domain events of the two
// aggregates (an upgrade manager and a node upgrade), their CloudEvents 1.0
// envelope, the JetStream subjects they are stored on, and the binary-mode wire
// format used on NATS (lower-case "ce-" headers, JSON body).
//
// The catalogue is the contract between every component and the stream's
// history: types are versioned ("….v1"), decoding never panics, and a type
// whose schema changes gets a new version plus an upcaster (see RegisterUpcaster)
// so that old history keeps folding.
package events
