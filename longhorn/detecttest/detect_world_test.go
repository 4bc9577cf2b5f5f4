package detecttest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/switchback-dev/switchback/longhorn"
	"github.com/switchback-dev/switchback/test/harness/testenv"
)

type world struct {
	t    *testing.T
	ctx  context.Context
	cfg  *rest.Config
	dyn  dynamic.Interface
	disc discovery.DiscoveryInterface
	root string
}

// install serves the CRDs of test/<dir>, changed by edit (nil: as they are);
// a CRD edit returns false for drops it.
func (w *world) install(dir string, edit func(crd *unstructured.Unstructured) bool) {
	w.t.Helper()
	crds, err := testenv.ReadCRDs(filepath.Join(w.root, "test", dir))
	require.NoError(w.t, err)
	out := w.t.TempDir()
	for _, crd := range crds {
		if edit != nil && !edit(crd) {
			continue
		}
		b, err := json.Marshal(crd.Object)
		require.NoError(w.t, err)
		require.NoError(w.t, os.WriteFile(filepath.Join(out, crd.GetName()+".json"), b, 0o644))
	}
	require.NoError(w.t, testenv.InstallCRDs(w.ctx, w.cfg, out))
}

// uninstall deletes the CRDs of test/<dir> and waits until discovery no
// longer serves them.
func (w *world) uninstall(dir string) {
	w.t.Helper()
	crds, err := testenv.ReadCRDs(filepath.Join(w.root, "test", dir))
	require.NoError(w.t, err)
	api := w.dyn.Resource(crdResource)
	for _, crd := range crds {
		require.NoError(w.t, api.Delete(w.ctx, crd.GetName(), metav1.DeleteOptions{}))
	}
	// The apiserver removes a CRD's objects before the CRD itself, slowly
	// on a loaded machine; then discovery stops serving it.
	for _, crd := range crds {
		deadline := time.Now().Add(3 * time.Minute)
		for {
			got, err := api.Get(w.ctx, crd.GetName(), metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				break
			}
			require.NoError(w.t, err)
			if time.Now().After(deadline) {
				conditions, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
				w.t.Fatalf("CRD %s still there 3 minutes after its deletion: finalizers %v, conditions %v", crd.GetName(), got.GetFinalizers(), conditions)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	w.until("the CRDs of "+dir+" no longer served", func(s longhorn.Surface) bool {
		for _, crd := range crds {
			plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
			if slices.Contains(s.Served, plural) {
				return false
			}
		}
		return true
	})
}

// drop removes a property (a dotted path under the schema's root) from a
// CRD of the given plural.
func drop(plural string, paths ...string) func(*unstructured.Unstructured) bool {
	return func(crd *unstructured.Unstructured) bool {
		p, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
		if p != plural {
			return true
		}
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		for i := range versions {
			v := versions[i].(map[string]any)
			for _, path := range paths {
				fields := []string{"schema", "openAPIV3Schema"}
				parts := strings.Split(path, ".")
				for _, part := range parts[:len(parts)-1] {
					fields = append(fields, "properties", part)
				}
				props, _, _ := unstructured.NestedMap(v, append(fields, "properties")...)
				delete(props, parts[len(parts)-1])
				_ = unstructured.SetNestedMap(v, props, append(fields, "properties")...)
			}
			versions[i] = v
		}
		_ = unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions")
		return true
	}
}

// without drops whole CRDs by plural.
func without(plurals ...string) func(*unstructured.Unstructured) bool {
	return func(crd *unstructured.Unstructured) bool {
		p, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
		return !slices.Contains(plurals, p)
	}
}

func both(a, b func(*unstructured.Unstructured) bool) func(*unstructured.Unstructured) bool {
	return func(crd *unstructured.Unstructured) bool { return a(crd) && b(crd) }
}

// surface reads the surface as the adapter does.
func (w *world) surface() longhorn.Surface {
	w.t.Helper()
	s, err := longhorn.ReadSurface(w.ctx, w.disc, w.dyn, ns)
	require.NoError(w.t, err)
	return s
}

// until waits for the apiserver to publish what cond wants (the OpenAPI
// document follows a CRD change after a moment).
func (w *world) until(what string, cond func(longhorn.Surface) bool) longhorn.Surface {
	w.t.Helper()
	var s longhorn.Surface
	// A CRD is served until the apiserver has removed its objects, which
	// takes longer on a loaded machine.
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		w.disc = memoryless(w.cfg)
		if s = w.surface(); cond(s) {
			return s
		}
		time.Sleep(50 * time.Millisecond)
	}
	w.t.Fatalf("%s: not reached; last surface %+v", what, s)
	return s
}

// memoryless is a fresh discovery client: discovery answers are cached per
// client.
func memoryless(cfg *rest.Config) discovery.DiscoveryInterface {
	d, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		panic(err)
	}
	return d
}

func hasField(resource, field string) func(longhorn.Surface) bool {
	return func(s longhorn.Surface) bool { return s.Fields[resource+" "+field] }
}

func lacksField(resource, field string) func(longhorn.Surface) bool {
	return func(s longhorn.Surface) bool {
		has, known := s.Fields[resource+" "+field]
		return known && !has
	}
}
