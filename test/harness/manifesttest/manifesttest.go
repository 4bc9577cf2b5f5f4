// Package manifesttest is what the tests of the install (deploy/, its Helm
// chart and its monitoring) share: paths in the repository, kubectl and
// kustomize of the test apiserver (package testenv), decoding rendered
// YAML, and the stand-ins the install needs on a bare apiserver.
package manifesttest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/switchback-dev/switchback/test/harness/testenv"
)

// RepoPath is a path under the repository root.
func RepoPath(t *testing.T, elem ...string) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	return filepath.Join(append([]string{root}, elem...)...)
}

// Kubectl runs the built kubectl against the test apiserver and returns its
// stdout, failing the test on an error.
func Kubectl(t *testing.T, stdin []byte, args ...string) string {
	t.Helper()
	env := testenv.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, stderr, err := env.Kubectl(ctx, bytes.NewReader(stdin), args...)
	require.NoError(t, err, "kubectl %s\n%s\n%s", strings.Join(args, " "), out, stderr)
	return out
}

// Kustomize renders the kustomization in dir as `kubectl apply -k` would.
func Kustomize(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	return Decode(t, Kubectl(t, nil, "kustomize", dir))
}

// Decode decodes a multi-document YAML (or JSON) stream into objects.
func Decode(t *testing.T, text string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(text), 4096)
	for {
		var obj map[string]any
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		if obj != nil {
			out = append(out, &unstructured.Unstructured{Object: obj})
		}
	}
}

// PrepareAPIServer installs what the install needs besides its CRDs, as the
// stand-ins of deploy/testdata: Longhorn's namespace (Longhorn owns it; the
// install only uses it) and cert-manager's CRDs.
func PrepareAPIServer(t *testing.T) {
	t.Helper()
	env := testenv.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, testenv.InstallCRDs(ctx, env.Config, RepoPath(t, "deploy", "testdata", "cert-manager-crds")))
	Kubectl(t, nil, "apply", "-f", RepoPath(t, "deploy", "testdata", "longhorn-namespace.yaml"))
}
