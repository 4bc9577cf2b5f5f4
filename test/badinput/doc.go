// Package badinput holds no code, only tests: a catalogue of bad inputs fed
// to Switchback the way they would arrive in production, each with the error
// a user must see and the proof that nothing was lost.
//
// The inputs come through the real entry points: manifests applied with
// kubectl to a real kube-apiserver (testenv.Main starts one for the
// package), admission requests decided by the webhook's Admitter, messages
// published by hand on the JetStream streams the engine runs on, a cluster
// that changes under an upgrade, and a store file damaged between two runs of
// the server.
//
// Every case records what was expected and what happened (what the user
// sees); the last test of the package, TestZZSummary, prints the table of
// every case that ran: go test -v ./test/badinput/ shows it (without -v, go test
// shows a passing package's output only as "ok"). A case whose safe
// handling needs a change elsewhere is skipped with "BUG: ...", naming the
// fix, and listed as such in the table.
package badinput
