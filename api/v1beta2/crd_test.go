package v1beta2_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/switchback-dev/switchback/api/v1beta2"
)

// TestCRDsEstablished checks what the apiserver made of the generated CRDs:
// established, namespaced, with the short names, categories, status
// subresource and printer columns users rely on.
func TestCRDsEstablished(t *testing.T) {
	f := newFixture(t)
	client, err := dynamic.NewForConfig(f.env.Config)
	require.NoError(t, err)
	crds := client.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})

	tests := []struct {
		name      string
		kind      string
		shortName string
		columns   []string
	}{
		{
			name:      v1beta2.DataEngineUpgradeManagerResource + "." + v1beta2.GroupName,
			kind:      "DataEngineUpgradeManager",
			shortName: "lhum",
			columns:   []string{"State", "Upgrading Node", "Completed", "Total", "Initiators", "Replicas", "Age"},
		},
		{
			name:      v1beta2.NodeDataEngineUpgradeResource + "." + v1beta2.GroupName,
			kind:      "NodeDataEngineUpgrade",
			shortName: "lhnu",
			columns:   []string{"Node", "State", "Volumes", "Age"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			crd, err := crds.Get(f.ctx, tt.name, metav1.GetOptions{})
			require.NoError(t, err)

			conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			status := map[string]string{}
			for _, c := range conds {
				m := c.(map[string]any)
				status[m["type"].(string)] = m["status"].(string)
			}
			assert.Equal(t, "True", status["Established"], "conditions: %v", status)
			assert.Equal(t, "True", status["NamesAccepted"], "conditions: %v", status)

			scope, _, _ := unstructured.NestedString(crd.Object, "spec", "scope")
			assert.Equal(t, "Namespaced", scope)
			kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
			assert.Equal(t, tt.kind, kind)
			shortNames, _, _ := unstructured.NestedStringSlice(crd.Object, "spec", "names", "shortNames")
			assert.Equal(t, []string{tt.shortName}, shortNames)
			categories, _, _ := unstructured.NestedStringSlice(crd.Object, "spec", "names", "categories")
			assert.ElementsMatch(t, []string{"longhorn", "switchback"}, categories)

			versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
			require.Len(t, versions, 1)
			v := versions[0].(map[string]any)
			assert.Equal(t, v1beta2.Version, v["name"])
			_, hasStatus, _ := unstructured.NestedMap(v, "subresources", "status")
			assert.True(t, hasStatus, "status subresource must be enabled")
			cols, _, _ := unstructured.NestedSlice(v, "additionalPrinterColumns")
			var names []string
			for _, c := range cols {
				names = append(names, c.(map[string]any)["name"].(string))
			}
			assert.Equal(t, tt.columns, names)
		})
	}
}

const exampleNDEU = `apiVersion: longhorn.io/v1beta2
kind: NodeDataEngineUpgrade
metadata:
  name: upgrade-node-subset-worker-2
  namespace: NAMESPACE
spec:
  nodeID: worker-2
  dataEngine: v2
  instanceManagerImage: longhornio/longhorn-instance-manager:v1.10.0
  dataEngineUpgradeManager: upgrade-node-subset
`

// TestKubectlApplyExamples applies deploy/examples/ with the built kubectl,
// as a user would, and checks the printer columns of `kubectl get lhum,lhnu`.
func TestKubectlApplyExamples(t *testing.T) {
	f := newFixture(t)
	const ns = "longhorn-system"
	_, stderr, err := f.kubectl("", "create", "namespace", ns)
	require.NoError(t, err, stderr)

	examples := repoPath(t, "deploy", "examples")
	out, stderr, err := f.kubectl("", "apply", "-f", examples)
	require.NoError(t, err, stderr)
	assert.Contains(t, out, "dataengineupgrademanager.longhorn.io/upgrade-all-nodes created")
	assert.Contains(t, out, "dataengineupgrademanager.longhorn.io/upgrade-node-subset created")

	// A second apply of unchanged manifests must not trip the immutability
	// rules.
	out, stderr, err = f.kubectl("", "apply", "-f", examples)
	require.NoError(t, err, stderr)
	assert.Contains(t, out, "upgrade-node-subset unchanged")

	// NodeDataEngineUpgrades are made by the controller, which does not run
	// here: create one and project a status as the controller would.
	_, stderr, err = f.kubectl(strings.ReplaceAll(exampleNDEU, "NAMESPACE", ns), "apply", "-f", "-")
	require.NoError(t, err, stderr)
	_, stderr, err = f.kubectl("", "-n", ns, "patch", "lhum", "upgrade-node-subset", "--subresource=status", "--type=merge",
		"-p", `{"status":{"state":"upgrading","upgradingNode":"worker-2","completedNodes":1,"totalNodes":2}}`)
	require.NoError(t, err, stderr)
	_, stderr, err = f.kubectl("", "-n", ns, "patch", "lhnu", "upgrade-node-subset-worker-2", "--subresource=status", "--type=merge",
		"-p", `{"status":{"state":"switching-over","volumeCount":3}}`)
	require.NoError(t, err, stderr)

	out, stderr, err = f.kubectl("", "-n", ns, "get", "lhum,lhnu")
	require.NoError(t, err, stderr)
	t.Logf("kubectl get lhum,lhnu:\n%s", out)

	lines := strings.Split(out, "\n")
	has := func(re string) {
		t.Helper()
		rx := regexp.MustCompile(re)
		for _, l := range lines {
			if rx.MatchString(strings.TrimRight(l, " ")) {
				return
			}
		}
		t.Errorf("no line of kubectl output matches %q", re)
	}
	has(`^NAME\s+STATE\s+UPGRADING NODE\s+COMPLETED\s+TOTAL\s+AGE$`)
	has(`^dataengineupgrademanager\.longhorn\.io/upgrade-node-subset\s+upgrading\s+worker-2\s+1\s+2\s+\d+s$`)
	has(`^dataengineupgrademanager\.longhorn\.io/upgrade-all-nodes\s+`)
	has(`^NAME\s+NODE\s+STATE\s+VOLUMES\s+AGE$`)
	has(`^nodedataengineupgrade\.longhorn\.io/upgrade-node-subset-worker-2\s+worker-2\s+switching-over\s+3\s+\d+s$`)

	// The categories let `kubectl get switchback` list both kinds at once.
	out, stderr, err = f.kubectl("", "-n", ns, "get", "switchback", "-o", "name")
	require.NoError(t, err, stderr)
	assert.ElementsMatch(t, []string{
		"dataengineupgrademanager.longhorn.io/upgrade-all-nodes",
		"dataengineupgrademanager.longhorn.io/upgrade-node-subset",
		"nodedataengineupgrade.longhorn.io/upgrade-node-subset-worker-2",
	}, strings.Fields(out))
}
