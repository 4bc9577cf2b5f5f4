// Package topology is the one home of Switchback's NATS topology: the
// streams and the subjects they capture, the durable consumers and their
// settings, the dead-letter subjects and headers, and the JetStream API,
// acknowledgement and advisory subjects the permissions are written in
// (natsauth derives every permission from these names). The event
// subjects of the aggregates themselves are events' (events/subjects.go).
package topology
