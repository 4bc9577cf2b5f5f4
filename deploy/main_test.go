// Package deploy tests the manifests under deploy/ as they are installed:
// rendered by the kustomize of the built kubectl, the NATS configuration run
// in embedded nats-servers, the NetworkPolicies evaluated over the rendered
// pods, everything applied (server-side dry run) on the real kube-apiserver
// that testenv starts. It holds tests only.
package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/switchback-dev/switchback/test/harness/manifesttest"
	"github.com/switchback-dev/switchback/test/harness/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// namespace is the one deploy/kustomization.yaml installs into.
const namespace = "longhorn-system"

// Names in the manifests that several tests refer to.
const (
	natsName       = "switchback-nats"
	controllerName = "switchback-controller"
	workerName     = "switchback-worker"
	insecureNATS   = "insecure-nats"
)

// overlay writes a kustomization on top of deploy/ with the given
// components of deploy/ and extra text, the way the manifests' comments
// tell users to, and returns its directory.
func overlay(t *testing.T, components []string, extra string) string {
	t.Helper()
	dir := t.TempDir()
	base, err := filepath.Rel(dir, repoPath(t, "deploy"))
	require.NoError(t, err)
	text := "resources: [" + base + "]\n"
	if len(components) > 0 {
		text += "components:\n"
		for _, c := range components {
			text += "- " + filepath.Join(base, c) + "\n"
		}
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(text+extra), 0o600))
	return dir
}

// manifests are the objects of a rendered kustomization.
type manifests []*unstructured.Unstructured

// ofKind returns the objects of a kind.
func (m manifests) ofKind(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, u := range m {
		if u.GetKind() == kind {
			out = append(out, u)
		}
	}
	return out
}

// object returns the object of a kind and name, failing the test without it.
func (m manifests) object(t *testing.T, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, u := range m.ofKind(kind) {
		if u.GetName() == name {
			return u
		}
	}
	t.Fatalf("the render has no %s %s", kind, name)
	return nil
}

// decode converts an unstructured object (or a part of one) to T.
func decode[T any](t *testing.T, obj map[string]any) *T {
	t.Helper()
	var out T
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &out))
	return &out
}

// workload is the pod template of a rendered Deployment, DaemonSet or
// StatefulSet.
type workload struct {
	kind, name, namespace string
	pod                   corev1.PodTemplateSpec
}

// workloads returns every pod template of the render.
func (m manifests) workloads(t *testing.T) []workload {
	t.Helper()
	var out []workload
	for _, u := range m {
		switch u.GetKind() {
		case "Deployment", "DaemonSet", "StatefulSet":
			tmpl, found, err := unstructured.NestedMap(u.Object, "spec", "template")
			require.NoError(t, err)
			require.True(t, found, "%s %s has no pod template", u.GetKind(), u.GetName())
			out = append(out, workload{kind: u.GetKind(), name: u.GetName(), namespace: u.GetNamespace(), pod: *decode[corev1.PodTemplateSpec](t, tmpl)})
		}
	}
	return out
}

// workload returns the workload of a name.
func (m manifests) workload(t *testing.T, name string) workload {
	t.Helper()
	for _, w := range m.workloads(t) {
		if w.name == name {
			return w
		}
	}
	t.Fatalf("the render has no workload %s", name)
	return workload{}
}

// container is the workload's own container: the first (a sidecar, the
// NATS servers' reloader, comes after it).
func (w workload) container(t *testing.T) corev1.Container {
	t.Helper()
	require.NotEmpty(t, w.pod.Spec.Containers, "%s %s", w.kind, w.name)
	return w.pod.Spec.Containers[0]
}

// flag is the value of --name=value in the container's args ("" without it).
func (w workload) flag(t *testing.T, name string) string {
	t.Helper()
	for _, a := range w.container(t).Args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

// volume returns the pod's volume of a name.
func (w workload) volume(t *testing.T, name string) corev1.Volume {
	t.Helper()
	for _, v := range w.pod.Spec.Volumes {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("%s %s has no volume %s", w.kind, w.name, name)
	return corev1.Volume{}
}

// mountedFile resolves a file path in the container to the volume and the
// path inside it, failing the test when no volume is mounted above it.
func (w workload) mountedFile(t *testing.T, path string) (corev1.Volume, string) {
	t.Helper()
	for _, vm := range w.container(t).VolumeMounts {
		if rel, ok := strings.CutPrefix(path, strings.TrimSuffix(vm.MountPath, "/")+"/"); ok {
			return w.volume(t, vm.Name), rel
		}
	}
	t.Fatalf("%s %s mounts nothing at %s", w.kind, w.name, path)
	return corev1.Volume{}, ""
}

// secretFile is the Secret and key a secret volume projects at rel.
func secretFile(t *testing.T, v corev1.Volume, rel string) (string, string) {
	t.Helper()
	require.NotNil(t, v.Secret, "volume %s is not a Secret", v.Name)
	for _, it := range v.Secret.Items {
		if it.Path == rel {
			return v.Secret.SecretName, it.Key
		}
	}
	require.Empty(t, v.Secret.Items, "volume %s projects nothing at %s", v.Name, rel)
	return v.Secret.SecretName, rel
}

// writeFile writes data under dir, creating directories.
func writeFile(t *testing.T, dir, rel string, data []byte) {
	t.Helper()
	path := filepath.Join(dir, rel)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	require.NoError(t, os.WriteFile(path, data, 0o600))
}

// repoPath, kubectl: package manifesttest's, shared with the chart's and the
// monitoring's tests.
var (
	repoPath = manifesttest.RepoPath
	kubectl  = manifesttest.Kubectl
)

// render renders the kustomization in dir as `kubectl apply -k` would.
func render(t *testing.T, dir string) manifests {
	t.Helper()
	return manifests(manifesttest.Kustomize(t, dir))
}
