package badinput_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/switchback-dev/switchback/kubeclient"
	"github.com/switchback-dev/switchback/test/harness/testenv"
)

// One real kube-apiserver (with etcd and the CRDs of deploy/crds) serves
// every test of the package.
func TestMain(m *testing.M) { testenv.Main(m) }

// row is one line of the catalogue's summary table.
type row struct {
	name, expected, got, result string
}

var catalogue struct {
	mu   sync.Mutex
	rows []*row
}

// bad is one catalogue case in progress.
type bad struct {
	t *testing.T
	r *row
}

// newCase registers the running test as the catalogue case name, whose
// expected outcome (what the user sees, and what must not be lost) is
// expected. Call Got with what actually happened; the result (pass, FAIL,
// BUG) is taken from the test's outcome when it ends.
func newCase(t *testing.T, name, expected string) *bad {
	t.Helper()
	r := &row{name: name, expected: expected, got: "(not reached)"}
	catalogue.mu.Lock()
	catalogue.rows = append(catalogue.rows, r)
	catalogue.mu.Unlock()
	t.Cleanup(func() {
		catalogue.mu.Lock()
		defer catalogue.mu.Unlock()
		switch {
		case t.Failed():
			r.result = "FAIL"
		case t.Skipped() && strings.HasPrefix(r.result, "BUG"):
		case t.Skipped():
			r.result = "skipped"
		default:
			r.result = "pass"
		}
	})
	return &bad{t: t, r: r}
}

// Got records what happened (printf-style), and logs it.
func (b *bad) Got(format string, args ...any) {
	b.t.Helper()
	s := fmt.Sprintf(format, args...)
	catalogue.mu.Lock()
	b.r.got = s
	catalogue.mu.Unlock()
	b.t.Logf("got: %s", s)
}

// Bug records the current behaviour as a bug whose fix is outside this
// package and skips the rest of the case (which asserts the fixed
// behaviour).
func (b *bad) Bug(format string, args ...any) {
	b.t.Helper()
	catalogue.mu.Lock()
	b.r.result = "BUG (skipped)"
	catalogue.mu.Unlock()
	b.t.Skipf("BUG: "+format, args...)
}

// printCatalogue writes the summary table.
func printCatalogue(w io.Writer) {
	catalogue.mu.Lock()
	defer catalogue.mu.Unlock()
	counts := map[string]int{}
	fmt.Fprintf(w, "\nBad-input catalogue: %d case(s)\n", len(catalogue.rows))
	fmt.Fprintf(w, "%-3s | %-56s | %-56s | %-90s | %s\n", "#", "case", "expected", "got", "result")
	fmt.Fprintln(w, strings.Repeat("-", 230))
	for i, r := range catalogue.rows {
		counts[r.result]++
		fmt.Fprintf(w, "%-3d | %-56s | %-56s | %-90s | %s\n", i+1, clip(r.name, 56), clip(r.expected, 56), clip(r.got, 90), r.result)
	}
	fmt.Fprintf(w, "totals: %d pass, %d BUG (skipped), %d FAIL, %d other\n",
		counts["pass"], counts["BUG (skipped)"], counts["FAIL"], len(catalogue.rows)-counts["pass"]-counts["BUG (skipped)"]-counts["FAIL"])
}

func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

// kube is a test's Kubernetes side: clients and a namespace of its own on
// the package's apiserver.
type kube struct {
	env *testenv.Env
	cs  kubernetes.Interface
	kc  *kubeclient.Client
	ns  string
}

var nsSeq atomic.Int64

func newKube(t *testing.T, ctx context.Context) *kube {
	t.Helper()
	env := testenv.Get(t)
	cs, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	kc, err := kubeclient.New(env.Config)
	require.NoError(t, err)
	// Namespaces are never deleted: without a namespace controller they
	// would stay Terminating, and the apiserver is thrown away anyway.
	ns := fmt.Sprintf("bad-%d", nsSeq.Add(1))
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return &kube{env: env, cs: cs, kc: kc, ns: ns}
}

// apply runs `kubectl apply` on manifest (NAMESPACE replaced by the test's
// namespace) and returns kubectl's output and error, as a user would see
// them.
func (k *kube) apply(ctx context.Context, manifest string) (string, error) {
	out, errOut, err := k.env.Kubectl(ctx, strings.NewReader(strings.ReplaceAll(manifest, "NAMESPACE", k.ns)), "apply", "-f", "-")
	return strings.TrimSpace(out + errOut), err
}

// testLog is a logger for the engine's components: silent unless
// BADINPUT_LOG is set.
func testLog(t *testing.T) *slog.Logger {
	var w io.Writer = io.Discard
	if os.Getenv("BADINPUT_LOG") != "" {
		w = t.Output()
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// waitFor polls get every 10ms until cond holds, failing after timeout with
// the last value.
func waitFor[T any](t *testing.T, timeout time.Duration, what string, get func() (T, error), cond func(T) bool) T {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var (
		last T
		err  error
	)
	for {
		if last, err = get(); err == nil && cond(last) {
			return last
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %s (last error %v); last value: %+v", what, timeout, err, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
