package natsauth

import (
	"crypto/sha256"
	"encoding/hex"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Names of the generated Secrets.
const (
	// ControllerSecretName holds the controller's credential.
	ControllerSecretName = "switchback-nats-controller"
	// ReaderSecretName holds the reader's credential, for operators
	// (`kubectl get secret switchback-nats-reader`).
	ReaderSecretName = "switchback-nats-reader"
	// WorkersSecretName is the shared Secret of every worker's credential
	// (SharedSecret layout), keyed by SecretKey.
	WorkersSecretName = "switchback-nats-workers"
	// workerSecretPrefix prefixes each worker's own Secret (SecretPerWorker).
	workerSecretPrefix = "switchback-nats-worker-"
	// ServerSecretName holds the servers' side, ServerConfig under
	// ServerSecretKey, which deploy/nats includes: public keys and bcrypt
	// hashes only, but a Secret so that nobody without Secret access can
	// read who the users are.
	ServerSecretName = "switchback-nats-server-auth"
	// ServerSecretKey is the key of ServerConfig in ServerSecretName.
	ServerSecretKey = "auth.conf"
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

// Secrets returns the Kubernetes Secrets of the authorization: the servers'
// side (ServerSecretName), the controller's and the reader's credentials,
// and the workers' in the given layout (none in callout mode, whose
// service keys are natsauth/callout's). Workers kept by public key only
// (Config.Existing without a seed) are left out: their seed is wherever it
// already was.
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
	out := []*corev1.Secret{
		secret(ServerSecretName, map[string][]byte{ServerSecretKey: []byte(a.text)}, comp("nats")),
		secret(ControllerSecretName, a.ControllerSecretData(), comp("controller")),
		secret(ReaderSecretName, a.ReaderSecretData(), comp("reader")),
	}
	switch {
	case a.cfg.Callout != nil:
		// The workers' users come from the callout: no worker Secret.
	case layout == SecretPerWorker:
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
