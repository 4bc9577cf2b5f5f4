package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/kubeclient"
	"github.com/switchback-dev/switchback/longhorn"
	"github.com/switchback-dev/switchback/test/harness/longhorntest"
	"github.com/switchback-dev/switchback/test/harness/testpki"
	"github.com/switchback-dev/switchback/webhook"
)

const switchbackWorker = "system:serviceaccount:" + installNS + ":switchback-worker"

// TestGuardOnTheAPIServer registers deploy/webhook/guard.yaml (pointed at a
// server on loopback) over Longhorn v1.12.1's pruning CRDs, with a node
// upgrade of n2 in progress as its NodeDataEngineUpgrade shows it: a CSI
// attach and an engine move onto n2 are refused naming the upgrade, the
// same elsewhere pass, Switchback's worker passes, everything passes once
// n2's upgrade is over, and with the server down Longhorn keeps working
// (failurePolicy Ignore).
func TestGuardOnTheAPIServer(t *testing.T) {
	env, ctx, cs := apiserver(t, 2*testTimeout)
	require.NoError(t, longhorntest.InstallCRDs(ctx, env.Config))
	dyn := longhorntest.Dynamic(t, env.Config)
	kc, err := kubeclient.New(env.Config)
	require.NoError(t, err)

	lh := func(gvr string) dynamic.ResourceInterface {
		return dyn.Resource(longhorn.GroupVersion.WithResource(gvr)).Namespace(installNS)
	}
	for _, v := range []struct{ name, engine string }{{"guard-v2", "v2"}, {"guard-v1", "v1"}} {
		_, err := lh("volumes").Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "longhorn.io/v1beta2", "kind": "Volume", "metadata": map[string]any{"name": v.name},
			"spec": map[string]any{"dataEngine": v.engine, "numberOfReplicas": int64(2), "frontend": "blockdev"},
		}}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = lh("volumeattachments").Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "longhorn.io/v1beta2", "kind": "VolumeAttachment", "metadata": map[string]any{"name": v.name},
			"spec": map[string]any{"volume": v.name, "attachmentTickets": map[string]any{}},
		}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	t.Cleanup(func() {
		for _, r := range []string{"volumeattachments", "volumes"} {
			for _, n := range []string{"guard-v2", "guard-v1"} {
				_ = lh(r).Delete(context.Background(), n, metav1.DeleteOptions{})
			}
		}
	})
	plane, err := longhorn.New(ctx, dyn, longhorn.Options{Namespace: installNS, Platform: dataplane.Platform{Profile: dataplane.ProfileV112, Evidence: "told by the test"}})
	require.NoError(t, err)

	// n2's upgrade, as the projector writes it.
	nu, err := kc.NodeUpgrades(installNS).Create(ctx, &v1beta2.NodeDataEngineUpgrade{
		ObjectMeta: metav1.ObjectMeta{Name: "upgrade-n2"},
		Spec: v1beta2.NodeDataEngineUpgradeSpec{NodeID: "n2", DataEngine: v1beta2.DataEngineTypeV2,
			InstanceManagerImage: "longhornio/longhorn-instance-manager:v1.12.1", DataEngineUpgradeManager: "upgrade"},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = kc.NodeUpgrades(installNS).Delete(context.Background(), nu.Name, metav1.DeleteOptions{}) })
	setState := func(st v1beta2.NodeUpgradeState) {
		t.Helper()
		cur, err := kc.NodeUpgrades(installNS).Get(ctx, nu.Name)
		require.NoError(t, err)
		cur.Status.State = st
		_, err = kc.NodeUpgrades(installNS).UpdateStatus(ctx, cur)
		require.NoError(t, err)
	}
	setState(v1beta2.NodeUpgradeStateSwitchingOver)
	informer := kc.NodeUpgrades(installNS).Informer(0)
	go informer.Run(ctx.Done())

	g, err := webhook.NewGuard(webhook.GuardConfig{Cluster: plane, Trusted: []string{switchbackWorker}, Logger: testLogger(t),
		Upgrading: webhook.UpgradingFromStore{Store: informer.GetStore(), Namespace: installNS, HasSynced: informer.HasSynced}})
	require.NoError(t, err)
	none := webhook.ActiveFunc(func(context.Context, types.UID) ([]string, error) { return nil, nil })
	admitter, err := webhook.NewAdmitter(webhook.AdmitterConfig{Namespace: installNS, Cluster: plane, Active: none})
	require.NoError(t, err)
	certs, err := testpki.Serving(testpki.CertOptions{IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	require.NoError(t, err)
	certFile, keyFile, err := certs.WriteFiles(t.TempDir())
	require.NoError(t, err)
	srv, err := webhook.NewServer(webhook.ServerConfig{CertFile: certFile, KeyFile: keyFile, Admitter: admitter, Guard: g, Logger: testLogger(t)})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srvCtx, stopServer := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(srvCtx, ln) }()
	defer stopServer()

	vwc := shippedGuardConfiguration(t)
	url := "https://" + ln.Addr().String() + webhook.GuardPath
	for i := range vwc.Webhooks {
		vwc.Webhooks[i].ClientConfig.Service = nil
		vwc.Webhooks[i].ClientConfig.URL = &url
		vwc.Webhooks[i].ClientConfig.CABundle = certs.CACert
	}
	_, err = cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), vwc.Name, metav1.DeleteOptions{})
	})

	attach := func(ri dynamic.NamespaceableResourceInterface, volume, ticket, node string, dryRun bool) error {
		patch := fmt.Sprintf(`{"spec":{"attachmentTickets":{%q:{"id":%q,"type":"csi-attacher","nodeID":%q,"parameters":{"disableFrontend":"false"}}}}}`, ticket, ticket, node)
		opts := metav1.PatchOptions{}
		if dryRun {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		_, err := ri.Namespace(installNS).Patch(ctx, volume, types.MergePatchType, []byte(patch), opts)
		return err
	}
	vas := dyn.Resource(longhorn.VolumeAttachmentsResource)
	const refusedAttach = `attaching v2 volume guard-v2 is refused while its node is upgraded: ticket csi-n2 (csi-attacher) for node n2, ` +
		`whose v2 data engine is being upgraded by DataEngineUpgradeManager longhorn-system/upgrade (switching-over)`
	// The apiserver calls the guard once it has the registration, and the
	// guard knows of n2's upgrade once its informer listed it.
	err = poll(ctx, 50*time.Millisecond, func() (bool, error) {
		err := attach(vas, "guard-v2", "csi-n2", "n2", true)
		return err != nil && strings.Contains(err.Error(), refusedAttach), err
	})
	require.NoError(t, err, "the guard never refused")

	t.Run("a CSI attach to the node being upgraded is refused, naming the upgrade", func(t *testing.T) {
		err := attach(vas, "guard-v2", "csi-n2", "n2", false)
		require.Error(t, err)
		assert.Contains(t, err.Error(), `admission webhook "`+webhook.GuardAttachmentsName+`" denied the request: `+refusedAttach)
	})
	t.Run("an attach elsewhere, and a v1 volume's, pass", func(t *testing.T) {
		require.NoError(t, attach(vas, "guard-v2", "csi-n1", "n1", false))
		require.NoError(t, attach(vas, "guard-v1", "csi-n2", "n2", false))
	})
	volumes := dyn.Resource(longhorn.VolumesResource)
	moveEngine := func(ri dynamic.NamespaceableResourceInterface, node string) error {
		_, err := ri.Namespace(installNS).Patch(ctx, "guard-v2", types.MergePatchType, fmt.Appendf(nil, `{"spec":{"engineNodeID":%q}}`, node), metav1.PatchOptions{})
		return err
	}
	t.Run("an engine moved onto the node is refused; elsewhere it passes", func(t *testing.T) {
		err := moveEngine(volumes, "n2")
		require.Error(t, err)
		assert.Contains(t, err.Error(), `admission webhook "`+webhook.GuardVolumesName+`" denied the request: moving the engine of v2 volume guard-v2 to node n2 (spec.engineNodeID) is refused`)
		require.NoError(t, moveEngine(volumes, "n3"))
	})
	t.Run("Switchback's worker moves an engine back onto the node", func(t *testing.T) {
		wcfg := rest.CopyConfig(env.Config)
		// n2's worker: the worker admission policy ties its writes to the
		// node its token names.
		wcfg.Impersonate = rest.ImpersonationConfig{UserName: switchbackWorker, Groups: []string{"system:masters"},
			Extra: map[string][]string{"authentication.kubernetes.io/node-name": {"n2"}}}
		wdyn := longhorntest.Dynamic(t, wcfg)
		// The controller's record of the target away (the worker policy
		// moves a target only as it says): home to n2, the engine node
		// before it left.
		record := func(value any) {
			t.Helper()
			body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{longhorn.TargetAwayAnnotation: value}}})
			require.NoError(t, err)
			_, err = volumes.Namespace(installNS).Patch(ctx, "guard-v2", types.MergePatchType, body, metav1.PatchOptions{})
			require.NoError(t, err)
		}
		record("n2,n2,n3")
		require.NoError(t, moveEngine(wdyn.Resource(longhorn.VolumesResource), "n2"))
		record(nil)
		require.NoError(t, moveEngine(volumes, ""), "back to the attached node, as before")
	})
	t.Run("a snapshot is kept while its volume's target moves, by anyone", func(t *testing.T) {
		setStatus := func(status map[string]any) {
			t.Helper()
			v, err := volumes.Namespace(installNS).Get(ctx, "guard-v2", metav1.GetOptions{})
			require.NoError(t, err)
			require.NoError(t, unstructured.SetNestedField(v.Object, status, "status"))
			_, err = volumes.Namespace(installNS).UpdateStatus(ctx, v, metav1.UpdateOptions{})
			require.NoError(t, err)
		}
		snaps := dyn.Resource(longhorn.SnapshotsResource).Namespace(installNS)
		_, err := snaps.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "longhorn.io/v1beta2", "kind": "Snapshot", "metadata": map[string]any{"name": "user-snap"},
			"spec": map[string]any{"volume": "guard-v2", "createSnapshot": true},
		}}, metav1.CreateOptions{})
		require.NoError(t, err)
		del := func(dryRun bool) error {
			opts := metav1.DeleteOptions{}
			if dryRun {
				opts.DryRun = []string{metav1.DryRunAll}
			}
			return snaps.Delete(ctx, "user-snap", opts)
		}
		setStatus(map[string]any{"state": "attached", "currentNodeID": "n1", "currentEngineNodeID": "n1", "switchoverState": "preparing"})
		err = poll(ctx, 50*time.Millisecond, func() (bool, error) {
			err := del(true)
			return err != nil && strings.Contains(err.Error(), "while the volume's target moves"), err
		})
		require.NoError(t, err, "the guard never refused the snapshot's deletion")
		err = del(false)
		require.Error(t, err)
		assert.Contains(t, err.Error(), `admission webhook "`+webhook.GuardSnapshotsName+`" denied the request: deleting snapshot user-snap of v2 volume guard-v2 is refused while the volume's target moves`)
		// Longhorn's own controllers are refused as well.
		lcfg := rest.CopyConfig(env.Config)
		lcfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + installNS + ":longhorn-service-account", Groups: []string{"system:masters"}}
		ldyn := longhorntest.Dynamic(t, lcfg)
		require.Error(t, ldyn.Resource(longhorn.SnapshotsResource).Namespace(installNS).Delete(ctx, "user-snap", metav1.DeleteOptions{}))

		setStatus(map[string]any{"state": "detached"})
		err = poll(ctx, 50*time.Millisecond, func() (bool, error) {
			err := del(false)
			return err == nil, err
		})
		require.NoError(t, err, "the move over (detached), the snapshot goes")
	})
	t.Run("once the node's upgrade is over, everything passes", func(t *testing.T) {
		setState(v1beta2.NodeUpgradeStateCompleted)
		err := poll(ctx, 50*time.Millisecond, func() (bool, error) {
			err := attach(vas, "guard-v2", "csi-n2", "n2", false)
			return err == nil, err
		})
		require.NoError(t, err)
		require.NoError(t, moveEngine(volumes, "n2"))
	})
	t.Run("with Switchback down, Longhorn keeps working", func(t *testing.T) {
		setState(v1beta2.NodeUpgradeStateSwitchingOver)
		require.NoError(t, moveEngine(volumes, ""))
		require.Eventually(t, func() bool {
			if moveEngine(volumes, "n2") == nil {
				require.NoError(t, moveEngine(volumes, ""))
				return false
			}
			return true
		}, 10*time.Second, 20*time.Millisecond, "the guard sees n2 upgraded again")
		stopServer()
		require.NoError(t, <-served)
		require.NoError(t, attach(vas, "guard-v2", "csi-n2b", "n2", false), "failurePolicy Ignore")
		require.NoError(t, moveEngine(volumes, "n2"))
	})
}

// shippedGuardConfiguration reads deploy/webhook/guard.yaml, the
// configuration users install, and checks the properties the guard's
// safety rests on.
func shippedGuardConfiguration(t *testing.T) *admissionregistrationv1.ValidatingWebhookConfiguration {
	t.Helper()
	vwc := readWebhookConfiguration(t, "guard.yaml")
	require.Equal(t, webhook.GuardConfigurationName, vwc.Name)
	require.Len(t, vwc.Webhooks, 3)
	assert.Equal(t, webhook.GuardAttachmentsName, vwc.Webhooks[0].Name)
	assert.Equal(t, webhook.GuardVolumesName, vwc.Webhooks[1].Name)
	assert.Equal(t, webhook.GuardSnapshotsName, vwc.Webhooks[2].Name)
	for _, wh := range vwc.Webhooks {
		require.NotNil(t, wh.FailurePolicy)
		assert.Equal(t, admissionregistrationv1.Ignore, *wh.FailurePolicy, "Longhorn must keep working while Switchback is down")
		require.NotNil(t, wh.TimeoutSeconds)
		assert.Equal(t, int32(2), *wh.TimeoutSeconds)
		assert.Less(t, webhook.DefaultGuardTimeout, time.Duration(*wh.TimeoutSeconds)*time.Second)
		require.NotNil(t, wh.ClientConfig.Service)
		require.NotNil(t, wh.ClientConfig.Service.Path)
		assert.Equal(t, webhook.GuardPath, *wh.ClientConfig.Service.Path)
	}
	return vwc
}
