// Package aggregate holds what the two Switchback aggregates (the upgrade
// manager in package manager and the per-node upgrade in package nodeupgrade)
// share: the typed errors their Evolve and Decide functions return and the
// generic left fold used to rebuild a state from history.
//
// Both machines are pure: no I/O, no clock reads, no goroutines. Time reaches
// them only through event envelopes (Evolve) and is stamped by the caller on
// the events a decision produced (Decide).
package aggregate
