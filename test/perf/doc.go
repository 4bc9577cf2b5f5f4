// Package perf holds Switchback's process-level benchmarks: the real
// `switchback controller` binary started against a NATS stream holding a
// large history and the test kube-apiserver (start-up time, peak and steady
// RSS), and the `nats bench` CLI run on the same kind of server as the
// store, as a reference for our own append throughput; `switchback demo`
// run as a process at 50 and 200 nodes (time ratio, peak RSS); and whole
// upgrades of a simulated cluster, in this process, with the product's
// settings (against the data plane's floor, and per volume). They live in their
// own package because they build and run other programs; the benchmarks of
// one package's code live with that package.
//
// The package has no code outside its tests.
package perf
