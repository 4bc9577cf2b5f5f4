package v1beta2_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"

	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/test/harness/testenv"
)

// Every test of this package runs against one real kube-apiserver with the
// CRDs of deploy/crds installed.
func TestMain(m *testing.M) { testenv.Main(m) }

// testTimeout bounds each test's calls; the apiserver answers in
// milliseconds, so hitting it means something hangs.
const testTimeout = 60 * time.Second

var nsCounter atomic.Int64

// scheme knows the types of this package plus the core types (namespaces).
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := v1beta2.AddToScheme(s); err != nil {
		panic(fmt.Errorf("add v1beta2 to scheme: %w", err))
	}
	if err := corev1.AddToScheme(s); err != nil {
		panic(fmt.Errorf("add core/v1 to scheme: %w", err))
	}
	return s
}()

// fixture is what a test needs: the environment, a typed REST client for
// longhorn.io/v1beta2 built from this package's scheme (so AddToScheme and
// the generated deep copies are exercised too), and a fresh namespace.
type fixture struct {
	env *testenv.Env
	rc  *rest.RESTClient
	ns  string
	ctx context.Context
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	env := testenv.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)

	rc := restClient(t, env.Config, v1beta2.SchemeGroupVersion, "/apis")
	core := restClient(t, env.Config, corev1.SchemeGroupVersion, "/api")

	// Namespaces are never deleted: without a namespace controller they
	// would stay Terminating, and the apiserver is thrown away anyway.
	name := fmt.Sprintf("%s-%d", sanitize(t.Name()), nsCounter.Add(1))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	require.NoError(t, core.Post().Resource("namespaces").Body(ns).Do(ctx).Error())
	return &fixture{env: env, rc: rc, ns: name, ctx: ctx}
}

func restClient(t *testing.T, base *rest.Config, gv schema.GroupVersion, apiPath string) *rest.RESTClient {
	t.Helper()
	cfg := rest.CopyConfig(base)
	cfg.GroupVersion = &gv
	cfg.APIPath = apiPath
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	rc, err := rest.RESTClientFor(cfg)
	require.NoError(t, err)
	return rc
}

// sanitize turns a test name into a DNS-1123 label prefix.
func sanitize(s string) string {
	s = strings.ToLower(s)
	var b strings.Builder
	for _, r := range s {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	out := strings.Trim(b.String(), "-")
	if len(out) > 40 {
		out = strings.Trim(out[:40], "-")
	}
	return out
}

// crObject is what the typed helpers below accept.
type crObject interface {
	runtime.Object
	metav1.Object
}

func resourceOf(obj runtime.Object) string {
	switch obj.(type) {
	case *v1beta2.DataEngineUpgradeManager:
		return v1beta2.DataEngineUpgradeManagerResource
	case *v1beta2.NodeDataEngineUpgrade:
		return v1beta2.NodeDataEngineUpgradeResource
	default:
		panic(fmt.Sprintf("no resource for %T", obj))
	}
}

func (f *fixture) create(in, out crObject) error {
	return f.rc.Post().Namespace(f.ns).Resource(resourceOf(in)).Body(in).Do(f.ctx).Into(out)
}

func (f *fixture) update(in, out crObject) error {
	return f.rc.Put().Namespace(f.ns).Resource(resourceOf(in)).Name(in.GetName()).Body(in).Do(f.ctx).Into(out)
}

func (f *fixture) updateStatus(in, out crObject) error {
	return f.rc.Put().Namespace(f.ns).Resource(resourceOf(in)).Name(in.GetName()).SubResource("status").Body(in).Do(f.ctx).Into(out)
}

func (f *fixture) get(name string, out crObject) error {
	return f.rc.Get().Namespace(f.ns).Resource(resourceOf(out)).Name(name).Do(f.ctx).Into(out)
}

// kubectl runs the built kubectl against the environment.
func (f *fixture) kubectl(stdin string, args ...string) (stdout, stderr string, err error) {
	if stdin == "" {
		return f.env.Kubectl(f.ctx, nil, args...)
	}
	return f.env.Kubectl(f.ctx, strings.NewReader(stdin), args...)
}

// apply runs `kubectl apply` on a manifest whose NAMESPACE placeholder is
// replaced by the fixture's namespace.
func (f *fixture) apply(manifest string) (stdout, stderr string, err error) {
	return f.kubectl(strings.ReplaceAll(manifest, "NAMESPACE", f.ns), "apply", "-f", "-")
}

func repoPath(t *testing.T, elem ...string) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	return filepath.Join(append([]string{root}, elem...)...)
}
