package integration_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/switchback-dev/switchback/test/harness/testenv"
)

// Every test of this package runs against one kube-apiserver with the CRDs of
// deploy/crds installed.
func TestMain(m *testing.M) { testenv.Main(m) }

// testTimeout bounds each test: the apiserver and the webhook answer in
// milliseconds, so reaching it means something hangs.
const testTimeout = 60 * time.Second

// installNS is the namespace of the manifests in deploy/.
const installNS = "longhorn-system"

// apiserver is what every test here starts with: the package's apiserver,
// a context for the test's calls that ends after timeout or with the test,
// and a clientset, with installNS and namespaces created.
func apiserver(t *testing.T, timeout time.Duration, namespaces ...string) (*testenv.Env, context.Context, kubernetes.Interface) {
	t.Helper()
	env := testenv.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	cs, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	ensureNamespaces(ctx, t, cs, append([]string{installNS}, namespaces...)...)
	return env, ctx, cs
}

// ensureNamespaces creates the namespaces if they do not exist yet. They are
// never deleted: with no namespace controller they would stay Terminating.
func ensureNamespaces(ctx context.Context, t *testing.T, cs kubernetes.Interface, names ...string) {
	t.Helper()
	for _, name := range names {
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
	}
}

// poll calls cond every interval until it reports done or ctx ends; it
// returns the last error cond saw, for the failure message.
func poll(ctx context.Context, interval time.Duration, cond func() (bool, error)) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	var last error
	for {
		done, err := cond()
		if done {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			if last != nil {
				return last
			}
			return ctx.Err()
		case <-t.C:
		}
	}
}

// testLogger sends the webhook's logs to the test log, so that a failure
// shows what the server saw. Servers using it must stop before the test ends.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
