// Package integration holds the tests of package webhook that need a real
// kube-apiserver (testenv): the webhook registered with the apiserver and
// exercised with kubectl, and the deploy/rbac and deploy/webhook manifests
// applied to it. It has no code of its own.
//
// They live apart from package webhook so that its unit tests, and above all
// its fuzzing (each fuzz worker runs TestMain again), do not start an
// apiserver.
package integration
