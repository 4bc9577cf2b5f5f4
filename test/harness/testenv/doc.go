// Package testenv runs a real etcd and kube-apiserver on loopback for the
// tests of Switchback, so that every test claiming Kubernetes behaviour (CEL
// validation, the status subresource, printer columns, server-side defaults)
// is checked against the real server rather than a fake clientset.
//
// The binaries are built from the Go module proxy by hack/k8s-testenv/build.sh
// (make testenv-bins) into <repo>/.cache/k8s/v<K8sVersion>/, or are taken
// from $K8S_BIN_DIR. The processes are started directly from Go and the PKI
// is made with crypto/x509, so tests need neither bash nor openssl.
//
// A test package starts one environment for all its tests:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		env := testenv.Get(t)
//		client := dynamic.NewForConfigOrDie(env.Config)
//		...
//	}
//
// A test of what Kubernetes' own controllers do (a PodDisruptionBudget's
// status, a StatefulSet recreating an evicted pod, the scheduler placing
// it) starts an environment of its own and Env.StartControllers on it;
// test/harness/kubelets stands in for the kubelets.
//
// When the binaries are missing the package fails, with a message telling to
// run `make testenv-bins`; outside CI (CI != "true") SKIP_APISERVER=1 turns
// that failure into skipped tests, announced loudly. CI never skips.
package testenv
