package integration_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/kubeclient"
	"github.com/switchback-dev/switchback/test/harness/testenv"
	"github.com/switchback-dev/switchback/test/harness/testpki"
	"github.com/switchback-dev/switchback/webhook"
)

// fixture is a webhook server on loopback registered with the apiserver.
type fixture struct {
	env     *testenv.Env
	ctx     context.Context
	cluster *switchableCluster
	kc      *kubeclient.Client
	cs      kubernetes.Interface
	vwc     string // the registration's name
	// managers is the admission's informer store of managers.
	managers cache.Store
	// calls counts the requests of kc, the client the controller's
	// admission has.
	calls *atomic.Int64
}

// countingTransport counts the requests it carries.
type countingTransport struct {
	next  http.RoundTripper
	calls *atomic.Int64
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.calls.Add(1)
	return c.next.RoundTrip(r)
}

// waitSeen waits until the admission's informer holds the manager named
// name of installNS in state ("" = gone).
func (f *fixture) waitSeen(t *testing.T, name string, state v1beta2.UpgradeState) {
	t.Helper()
	require.Eventually(t, func() bool {
		obj, ok, _ := f.managers.GetByKey(installNS + "/" + name)
		if state == "" {
			return !ok
		}
		m, isManager := obj.(*v1beta2.DataEngineUpgradeManager)
		return ok && isManager && m.Status.State == state
	}, testTimeout, 10*time.Millisecond, "the admission's informer sees %s in state %q", name, state)
}

// startWebhook serves the webhook on 127.0.0.1 with a certificate made for
// that address, registers the shipped configuration pointed at it by URL with
// the CA as caBundle, and waits until the apiserver calls it.
func startWebhook(t *testing.T) *fixture {
	t.Helper()
	env, ctx, cs := apiserver(t, testTimeout, otherNS)
	// The controller's client, counted: admission must not use it.
	calls := &atomic.Int64{}
	kcfg := rest.CopyConfig(env.Config)
	kcfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt, calls} })
	kc, err := kubeclient.New(kcfg)
	require.NoError(t, err)

	certs, err := testpki.Serving(testpki.CertOptions{IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	require.NoError(t, err)
	certFile, keyFile, err := certs.WriteFiles(t.TempDir())
	require.NoError(t, err)

	cluster := &switchableCluster{}
	cluster.set(threeNodes(t))
	// As the controller runs it: the active managers from an informer.
	managers := kc.Managers(installNS).Informer(0)
	go managers.Run(ctx.Done())
	admitter, err := webhook.NewAdmitter(webhook.AdmitterConfig{
		Namespace: installNS, Cluster: cluster, Logger: testLogger(t),
		Active: webhook.ActiveFromStore{Store: managers.GetStore(), Namespace: installNS, HasSynced: managers.HasSynced},
	})
	require.NoError(t, err)
	srv, err := webhook.NewServer(webhook.ServerConfig{CertFile: certFile, KeyFile: keyFile, Admitter: admitter, Logger: testLogger(t)})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srvCtx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(srvCtx, ln) }()
	t.Cleanup(func() {
		stop()
		assert.NoError(t, <-served)
	})

	vwc := shippedWebhookConfiguration(t)
	vwc.Name = "switchback-test"
	vwc.Webhooks[0].ClientConfig.Service = nil
	url := "https://" + ln.Addr().String() + webhook.ValidatePath
	vwc.Webhooks[0].ClientConfig.URL = &url
	vwc.Webhooks[0].ClientConfig.CABundle = certs.CACert
	_, err = cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		// Fail-closed: left behind, it would refuse every manager of later
		// tests once the server is gone.
		err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), vwc.Name, metav1.DeleteOptions{})
		assert.NoError(t, err)
	})

	f := &fixture{env: env, ctx: ctx, cluster: cluster, kc: kc, cs: cs, vwc: vwc.Name, managers: managers.GetStore(), calls: calls}
	f.waitRegistered(t)
	return f
}

// shippedWebhookConfiguration reads deploy/webhook's configuration, so that
// the rules the test relies on are the ones users install.
func shippedWebhookConfiguration(t *testing.T) *admissionregistrationv1.ValidatingWebhookConfiguration {
	t.Helper()
	vwc := readWebhookConfiguration(t, "validatingwebhookconfiguration.yaml")
	require.Equal(t, webhook.ConfigurationName, vwc.Name)
	require.Len(t, vwc.Webhooks, 1)
	wh := vwc.Webhooks[0]
	require.Equal(t, webhook.WebhookName, wh.Name)
	require.NotNil(t, wh.ClientConfig.Service)
	assert.Equal(t, webhook.ServiceName, wh.ClientConfig.Service.Name)
	assert.Equal(t, installNS, wh.ClientConfig.Service.Namespace)
	require.NotNil(t, wh.ClientConfig.Service.Path)
	assert.Equal(t, webhook.ValidatePath, *wh.ClientConfig.Service.Path)
	require.NotNil(t, wh.FailurePolicy)
	assert.Equal(t, admissionregistrationv1.Fail, *wh.FailurePolicy)
	require.NotNil(t, wh.TimeoutSeconds)
	assert.Equal(t, int32(5), *wh.TimeoutSeconds)
	assert.Less(t, webhook.DefaultAdmitTimeout, time.Duration(*wh.TimeoutSeconds)*time.Second,
		"the webhook answers before the apiserver gives up")
	return vwc
}

// readWebhookConfiguration decodes a ValidatingWebhookConfiguration of
// deploy/webhook.
func readWebhookConfiguration(t *testing.T, file string) *admissionregistrationv1.ValidatingWebhookConfiguration {
	t.Helper()
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(root, "deploy", "webhook", file))
	require.NoError(t, err)
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	require.NoError(t, utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(data)), 4096).Decode(&vwc))
	return &vwc
}

// waitRegistered waits until the apiserver's webhook configuration cache
// has the registration: a server-side dry run of a manager naming an unknown
// node is refused by the webhook. Dry runs reach it because it declares
// sideEffects: None.
func (f *fixture) waitRegistered(t *testing.T) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(f.env.Config)
	require.NoError(t, err)
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "longhorn.io/v1beta2", "kind": "DataEngineUpgradeManager",
		"metadata": map[string]any{"name": "probe", "namespace": installNS},
		"spec":     map[string]any{"dataEngine": "v2", "nodes": []any{"registration-probe"}},
	}}
	managers := dyn.Resource(v1beta2.SchemeGroupVersion.WithResource(v1beta2.DataEngineUpgradeManagerResource)).Namespace(installNS)
	err = poll(f.ctx, 50*time.Millisecond, func() (bool, error) {
		_, err := managers.Create(f.ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil {
			return false, fmt.Errorf("dry run accepted: the webhook is not called yet")
		}
		return strings.Contains(err.Error(), "registration-probe"), err
	})
	require.NoError(t, err, "the apiserver never called the webhook")
}

// behindTheWebhook creates a manager in ns while the registration leaves
// ns out (as on a cluster where the webhook was off when it was created),
// then puts the registration back as shipped.
func (f *fixture) behindTheWebhook(t *testing.T, ns, name string) *v1beta2.DataEngineUpgradeManager {
	t.Helper()
	vwcs := f.cs.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	setSelector := func(sel *metav1.LabelSelector) {
		cfg, err := vwcs.Get(f.ctx, f.vwc, metav1.GetOptions{})
		require.NoError(t, err)
		cfg.Webhooks[0].NamespaceSelector = sel
		_, err = vwcs.Update(f.ctx, cfg, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	shipped := shippedWebhookConfiguration(t).Webhooks[0].NamespaceSelector
	setSelector(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{ns}}}})
	defer setSelector(shipped)
	var created *v1beta2.DataEngineUpgradeManager
	err := poll(f.ctx, 50*time.Millisecond, func() (bool, error) {
		m, err := f.kc.Managers(ns).Create(f.ctx, &v1beta2.DataEngineUpgradeManager{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       v1beta2.DataEngineUpgradeManagerSpec{DataEngine: v1beta2.DataEngineTypeV2},
		})
		created = m
		return err == nil, err // refused until the apiserver sees the new selector
	})
	require.NoError(t, err)
	return created
}

// apply runs kubectl apply on manifest, as a user would.
func (f *fixture) apply(manifest string) (stdout, stderr string, err error) {
	return f.env.Kubectl(f.ctx, strings.NewReader(manifest), "apply", "-f", "-")
}

// deleteManagers removes every manager the subtest left, so that none
// counts as an active upgrade for the next one.
func (f *fixture) deleteManagers(t *testing.T) {
	t.Helper()
	list, err := f.kc.Managers("").List(f.ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, m := range list.Items {
		err := f.kc.Managers(m.Namespace).Delete(f.ctx, m.Name, metav1.DeleteOptions{})
		if !apierrors.IsNotFound(err) {
			require.NoError(t, err)
		}
		if m.Namespace == installNS {
			f.waitSeen(t, m.Name, "")
		}
	}
}
