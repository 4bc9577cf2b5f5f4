// Package natsauth generates the NATS authorization of a Switchback
// deployment: one user per node worker, allowed to consume only its node's
// commands and to append only its node's events, one controller user
// that owns everything else (streams, consumers, all events and commands,
// dead letters, snapshots), and one read-only user for operators, which
// reads the event and dead-letter streams and writes nothing
// (ReaderPermissions).
//
// The point is blast radius. A worker runs on every node with the node's
// privileges; if one is compromised or simply buggy (a misrouted command, a
// wrong subject), it must not be able to advance, fail or forge another
// node's upgrade, nor change the streams that hold the history. NATS subject
// permissions enforce that on the server, whatever the client does.
//
// Generate returns an Authorization: ServerConfig renders it as a nats-server
// configuration snippet (an authorization block, or an account block), and
// Configure applies the very same text to the server.Options of an embedded
// server (natsembed.Options.Configure), so what the tests prove is what
// operators deploy.
//
// A worker under this authorization cannot create or update streams or
// consumers, so it must bind to what the controller created: BindOnly wraps
// its JetStream context so that eventstore.Open and nodequeue.Open (which
// create-or-update) only look the streams up, and nodequeue.Queue.EnsureNodeConsumers is
// what the controller runs to create the node consumers in advance. A
// worker also needs its own inbox prefix (WorkerOptions), so that it can
// subscribe to its replies and nobody else's; so does the reader
// (ReaderOptions).
//
// WriteFiles writes the credentials for Secrets, and ReadFiles reads them
// back for a regeneration that keeps them; both use only directories of the
// current user and never follow a symbolic link (CheckDir, WriteFile).
//
// What subject permissions cannot express, and how it is handled, is in
// docs/nats-authorization.md: direct gets filter by subject in the request
// body (a worker can read the whole history, not only its node's). A worker
// reads snapshots and writes none (a writer of the bucket could roll it up):
// its store is opened with eventstore.Config.ReadOnlySnapshots.
package natsauth
