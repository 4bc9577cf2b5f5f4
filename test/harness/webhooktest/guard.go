// Package webhooktest serves Switchback's guard and the eviction scope of
// its workers to a test's apiserver as deploy/webhook registers them, so
// that end-to-end tests meet the admission a real installation has.
package webhooktest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/longhorn"
	"github.com/switchback-dev/switchback/test/harness/testenv"
	"github.com/switchback-dev/switchback/test/harness/testpki"
	"github.com/switchback-dev/switchback/webhook"
)

// probeNode is the node the registration probe attaches to: the guard's
// only upgrading node, which no test cluster has.
const probeNode = "switchback-registration-probe"

// probeUpgrades reports probeNode, and only it, as being upgraded.
type probeUpgrades struct{}

func (probeUpgrades) UpgradingNodes(context.Context) (map[string]webhook.NodeUpgrade, error) {
	return map[string]webhook.NodeUpgrade{probeNode: {Manager: "webhooktest/probe", State: "switching-over"}}, nil
}

// ServeGuard serves a webhook.Guard reading cluster on loopback, registers
// deploy/webhook/guard.yaml at it for namespace ns alone (with trusted as
// the guard's trusted users), and returns once the apiserver calls it. No
// node of the test's cluster counts as upgraded: what it guards is what
// holds whatever the upgrades (the snapshots of a volume whose target
// moves). Everything is removed when the test ends.
func ServeGuard(t testing.TB, cfg *rest.Config, ns string, cluster dataplane.Reader, trusted ...string) {
	t.Helper()
	g, err := webhook.NewGuard(webhook.GuardConfig{Cluster: cluster, Upgrading: probeUpgrades{}, Trusted: trusted})
	must(t, err, "new guard")
	ctx := register(t, cfg, ns, webhook.ServerConfig{Guard: g}, cluster, "guard.yaml", webhook.GuardPath,
		func(w *admissionregistrationv1.ValidatingWebhook) {
			w.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}
		})
	dyn, err := dynamic.NewForConfig(cfg)
	must(t, err, "dynamic client")
	must(t, waitCalled(ctx, dyn, ns), "the apiserver never called the guard")
}

// register serves srv's deciders (and an admitter that admits every
// manager) on loopback with a certificate of its own, registers
// deploy/webhook/<file> at path under a name of ns's, each webhook edited
// by edit, and returns a context that ends with the test. Everything is
// removed when the test ends.
func register(t testing.TB, cfg *rest.Config, ns string, srv webhook.ServerConfig, cluster dataplane.Reader, file, path string,
	edit func(*admissionregistrationv1.ValidatingWebhook)) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	admitter, err := webhook.NewAdmitter(webhook.AdmitterConfig{Namespace: ns, Cluster: cluster,
		Active: webhook.ActiveFunc(func(context.Context, types.UID) ([]string, error) { return nil, nil })})
	must(t, err, "new admitter")
	certs, err := testpki.Serving(testpki.CertOptions{IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	must(t, err, "serving certificate")
	srv.Admitter = admitter
	srv.CertFile, srv.KeyFile, err = certs.WriteFiles(t.TempDir())
	must(t, err, "write certificate")
	server, err := webhook.NewServer(srv)
	must(t, err, "new server")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err, "listen")
	served := make(chan error, 1)
	go func() { served <- server.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		// The apiserver may still open a connection as the registration
		// goes: a shutdown waiting it out is not the test's concern (the
		// server's own tests cover its shutdown).
		if err := <-served; err != nil {
			t.Logf("webhook server: %v", err)
		}
	})

	vwc, err := shipped(file)
	must(t, err, "read deploy/webhook/"+file)
	vwc.Name += "-" + ns
	url := "https://" + ln.Addr().String() + path
	for i := range vwc.Webhooks {
		vwc.Webhooks[i].ClientConfig.Service = nil
		vwc.Webhooks[i].ClientConfig.URL = &url
		vwc.Webhooks[i].ClientConfig.CABundle = certs.CACert
		edit(&vwc.Webhooks[i])
	}
	cs, err := kubernetes.NewForConfig(cfg)
	must(t, err, "clientset")
	vwcs := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	_, err = vwcs.Create(ctx, vwc, metav1.CreateOptions{})
	must(t, err, "register "+vwc.Name)
	t.Cleanup(func() {
		if err := vwcs.Delete(context.Background(), vwc.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("unregister %s: %v", vwc.Name, err)
		}
	})
	return ctx
}

// waitCalled polls a dry-run attachment to probeNode until the guard
// refuses it: the apiserver's webhook cache has the registration then. A
// dry run has no effect, and reaches the guard since it declares
// sideEffects None.
func waitCalled(ctx context.Context, dyn dynamic.Interface, ns string) error {
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": longhorn.GroupVersion.String(), "kind": "VolumeAttachment",
		"metadata": map[string]any{"name": probeNode},
		"spec": map[string]any{"volume": probeNode, "attachmentTickets": map[string]any{
			"probe": map[string]any{"id": "probe", "type": "csi-attacher", "nodeID": probeNode},
		}},
	}}
	ri := dyn.Resource(longhorn.VolumeAttachmentsResource).Namespace(ns)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		_, err := ri.Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil && strings.Contains(err.Error(), webhook.GuardAttachmentsName) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("last answer to the probe: %v: %w", err, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// shipped reads the configuration deploy/webhook/<file>.
func shipped(file string) (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(root, "deploy", "webhook", file))
	if err != nil {
		return nil, err
	}
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if err := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(data)), 4096).Decode(&vwc); err != nil {
		return nil, fmt.Errorf("decode %s: %w", file, err)
	}
	return &vwc, nil
}

func must(t testing.TB, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("webhooktest: %s: %v", what, err)
	}
}
