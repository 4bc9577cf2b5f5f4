// Package faults is the process-level fault-injection suite: the controller
// and one worker per node run as real `switchback` processes against a real
// kube-apiserver and NATS on loopback, over a simulated cluster served by the
// test process, while the suite kills, restarts and disconnects them
// mid-upgrade. Every scenario ends with the same invariants: the upgrade
// completed, the stream folds exactly to the custom resources' status
// (`switchback replay --verify`), every transition appears once, the
// simulator's I/O checker saw no failed I/O and nothing is left unsafe.
//
// The package holds only tests; run it with `make test-faults`, which prints
// the summary table.
package faults
