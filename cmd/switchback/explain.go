package main

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// The errors below keep the cause (%w) and add what to do about it: an
// operator meets them at a prompt, far from the code.

// explainNATS says why a connection to the NATS at natsURL failed, and what
// to check.
func explainNATS(natsURL string, err error) error {
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	switch {
	case errors.Is(err, nats.ErrNoServers):
		return fmt.Errorf("no NATS server answers at %s: %w\n"+
			"  check --nats-url and that the servers run (kubectl -n longhorn-system get pods -l app.kubernetes.io/name=switchback-nats);\n"+
			"  from outside the cluster: kubectl -n longhorn-system port-forward svc/switchback-nats 4222, then --nats-url tls://127.0.0.1:4222", natsURL, err)
	case errors.As(err, &unknownCA), errors.As(err, &hostname), errors.Is(err, nats.ErrSecureConnRequired), errors.Is(err, nats.ErrSecureConnWanted):
		return fmt.Errorf("TLS with the NATS at %s failed: %w\n"+
			"  give --nats-ca the CA that signed the server's certificate (ca.crt of the Secret switchback-nats-server-tls)", natsURL, err)
	case errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthExpired), strings.Contains(err.Error(), "Authorization Violation"):
		return fmt.Errorf("the NATS at %s refused the credentials: %w\n"+
			"  check --nats-creds, --nats-nkey or --nats-user with --nats-password-file (`switchback nats-auth` makes them)", natsURL, err)
	}
	return fmt.Errorf("connect to %s: %w", natsURL, err)
}

// explainStream says why Switchback's streams could not be opened on a NATS
// that answered.
func explainStream(natsURL string, err error) error {
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return fmt.Errorf("the NATS at %s holds no Switchback history (%w): is it Switchback's NATS, and has a controller started on it?", natsURL, err)
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		return fmt.Errorf("the NATS at %s does not serve JetStream to this user (%w): Switchback's users live in the account the servers' configuration gives JetStream", natsURL, err)
	}
	return err
}

// explainKube says why a request to the cluster at host ("" = unknown here)
// failed, and what to check; what names the request ("list the
// DataEngineUpgradeManagers in longhorn-system").
func explainKube(host, what string, err error) error {
	cluster := "the cluster"
	if host != "" {
		cluster += " at " + host
	}
	switch {
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("%s: %s refused the kubeconfig's credentials (expired or revoked?): %w", what, cluster, err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%s: the kubeconfig's user may not (%w)\n"+
			"  `kubectl auth can-i --list` shows what it may do; deploy/rbac holds the roles Switchback's own accounts get", what, err)
	case isUnreachable(err):
		return fmt.Errorf("%s: cannot reach %s: %w\n"+
			"  check --kubeconfig and --context (`kubectl cluster-info` with the same ones)", what, cluster, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func isUnreachable(err error) bool {
	var dns *net.DNSError
	var op *net.OpError
	return errors.Is(err, syscall.ECONNREFUSED) || errors.As(err, &dns) || errors.As(err, &op)
}

// unknownManager is the error of a manager name no event carries.
func unknownManager(name, namespace string, last uint64) error {
	where := "any namespace"
	if namespace != "" {
		where = "namespace " + namespace
	}
	return fmt.Errorf("no events for manager %q in %s (the stream's last sequence is %d): check the name and --namespace; `switchback replay` lists every upgrade", name, where, last)
}
