package natsauth

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Names of the generated Secrets.
const (
	// ControllerSecretName holds the controller's credential.
	ControllerSecretName = "switchback-nats-controller"
	// WorkersSecretName is the shared Secret of every worker's credential
	// (SharedSecret layout), keyed by SecretKey.
	WorkersSecretName = "switchback-nats-workers"
	// workerSecretPrefix prefixes each worker's own Secret (SecretPerWorker).
	workerSecretPrefix = "switchback-nats-worker-"
)

// SecretLayout says how the workers' credentials are packed into Secrets;
// docs/nats-authorization.md weighs the two.
type SecretLayout int

const (
	// SharedSecret puts every worker's credential in one Secret
	// (WorkersSecretName), each under SecretKey(node): one DaemonSet mounts
	// it and each pod reads /…/$(NODE_NAME).nk. Every node then holds every
	// seed.
	SharedSecret SecretLayout = iota
	// SecretPerWorker makes one Secret per node (WorkerSecretName), the
	// credential under WorkerKey: a node
	// can only be given its own if each node's pod references only its own
	// Secret (one workload per node), which is what keeps a compromised node
	// from reading the others' seeds (the kubelet may only read Secrets of
	// pods bound to its node).
	SecretPerWorker
)

// WorkerSecretName is node's own Secret in the SecretPerWorker layout,
// shortened with a hash when the node name is too long for a Secret name.
func WorkerSecretName(node string) string {
	name := workerSecretPrefix + node
	if len(name) <= validation.DNS1123SubdomainMaxLength {
		return name
	}
	sum := sha256.Sum256([]byte(node))
	keep := validation.DNS1123SubdomainMaxLength - len(workerSecretPrefix) - 11
	return workerSecretPrefix + trimName(node[:keep]) + "-" + hex.EncodeToString(sum[:])[:10]
}

func trimName(s string) string {
	for len(s) > 0 && (s[len(s)-1] == '.' || s[len(s)-1] == '-') {
		s = s[:len(s)-1]
	}
	return s
}

// Secrets returns the Kubernetes Secrets holding the credentials: the
// controller's, and the workers' in the given layout. Workers kept by
// public key only (Config.Existing without a seed) are left out: their seed
// is wherever it already was.
func (a *Authorization) Secrets(namespace string, layout SecretLayout) []*corev1.Secret {
	secret := func(name string, data map[string][]byte, labels map[string]string) *corev1.Secret {
		return &corev1.Secret{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels},
			Type:       corev1.SecretTypeOpaque,
			Data:       data,
		}
	}
	comp := func(c string) map[string]string {
		return map[string]string{"app.kubernetes.io/name": "switchback", "app.kubernetes.io/component": c}
	}
	out := []*corev1.Secret{secret(ControllerSecretName, a.ControllerSecretData(), comp("controller"))}
	switch layout {
	case SecretPerWorker:
		for _, w := range a.Workers {
			if v := w.Credential.secret(); v != nil {
				out = append(out, secret(WorkerSecretName(w.Node), map[string][]byte{a.WorkerKey(): v}, comp("worker")))
			}
		}
	default:
		out = append(out, secret(WorkersSecretName, a.SecretData(), comp("worker")))
	}
	return out
}

// Files names what WriteFiles writes under its directory.
const (
	// ConfigFile is the server configuration snippet (not secret).
	ConfigFile = "switchback-auth.conf"
	// ControllerDir holds the controller's credential files.
	ControllerDir = "controller"
	// WorkersDir holds one credential file per worker, named by SecretKey.
	WorkersDir = "workers"
)

// WriteFiles writes the generated authorization under dir: ConfigFile
// (mode 0644), the controller's credential under ControllerDir and each
// worker's under WorkersDir (mode 0600, directories 0700). Existing files
// are replaced. It is what a `switchback nats-auth` command writes before
// `kubectl create secret generic --from-file`.
func (a *Authorization) WriteFiles(dir string) error {
	var errs []error
	write := func(path string, data []byte, mode os.FileMode) {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			errs = append(errs, err)
			return
		}
		if err := os.WriteFile(path, data, mode); err != nil {
			errs = append(errs, err)
		}
	}
	write(filepath.Join(dir, ConfigFile), []byte(a.text), 0o644)
	for k, v := range a.ControllerSecretData() {
		write(filepath.Join(dir, ControllerDir, k), v, 0o600)
	}
	for k, v := range a.SecretData() {
		write(filepath.Join(dir, WorkersDir, k), v, 0o600)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("natsauth: write files under %s: %w", dir, err)
	}
	return nil
}
