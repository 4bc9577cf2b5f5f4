package v1beta2_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/switchback-dev/switchback/api/v1beta2"
)

// deum renders a DataEngineUpgradeManager manifest; nodes is the YAML of
// spec.nodes, or "" to leave the field out.
func deum(name, dataEngine, nodes string) string {
	m := fmt.Sprintf(`apiVersion: longhorn.io/v1beta2
kind: DataEngineUpgradeManager
metadata:
  name: %s
  namespace: NAMESPACE
spec:
  dataEngine: %s
`, name, dataEngine)
	if nodes != "" {
		m += "  nodes: " + nodes + "\n"
	}
	return m
}

// ndeu renders a NodeDataEngineUpgrade manifest.
func ndeu(name, nodeID, dataEngine, image, manager string) string {
	return fmt.Sprintf(`apiVersion: longhorn.io/v1beta2
kind: NodeDataEngineUpgrade
metadata:
  name: %s
  namespace: NAMESPACE
spec:
  nodeID: %s
  dataEngine: %s
  instanceManagerImage: %s
  dataEngineUpgradeManager: %s
`, name, nodeID, dataEngine, image, manager)
}

const (
	imageV1 = "longhornio/longhorn-instance-manager:v1.10.0"
	imageV2 = "longhornio/longhorn-instance-manager:v1.10.1"
)

// TestAdmissionRejections applies bad manifests with kubectl, as a user
// would, and checks that each is refused with a message naming the field.
// The cases with no wanted error are the controls: they prove the rules do
// not refuse what they should let through.
func TestAdmissionRejections(t *testing.T) {
	f := newFixture(t)

	tests := []struct {
		name    string
		kind    string // for the generation check after a refused update
		initial string // applied first and must be accepted; "" for none
		apply   string
		want    []string // substrings of kubectl's error; none = accepted
	}{
		{
			name:    "spec.nodes changed",
			kind:    "lhum",
			initial: deum("nodes-changed", "v2", "[node-1, node-2]"),
			apply:   deum("nodes-changed", "v2", "[node-1, node-3]"),
			want:    []string{"spec.nodes: Forbidden: spec.nodes is immutable"},
		},
		{
			name:    "spec.nodes added to an all-nodes manager",
			kind:    "lhum",
			initial: deum("nodes-added", "v2", ""),
			apply:   deum("nodes-added", "v2", "[node-1]"),
			want:    []string{"spec.nodes: Forbidden: spec.nodes is immutable"},
		},
		{
			name:    "spec.nodes removed",
			kind:    "lhum",
			initial: deum("nodes-removed", "v2", "[node-1]"),
			apply:   deum("nodes-removed", "v2", ""),
			want:    []string{"spec.nodes: Forbidden: spec.nodes is immutable"},
		},
		{
			name:    "control: spec.nodes reordered is the same set",
			kind:    "lhum",
			initial: deum("nodes-reordered", "v2", "[node-1, node-2]"),
			apply:   deum("nodes-reordered", "v2", "[node-2, node-1]"),
		},
		{
			name:    "control: empty spec.nodes and no spec.nodes both mean all nodes",
			kind:    "lhum",
			initial: deum("nodes-empty", "v2", ""),
			apply:   deum("nodes-empty", "v2", "[]"),
		},
		{
			name:    "spec.allowNodesWithoutReplicaScheduling turned on",
			kind:    "lhum",
			initial: deum("allow-on", "v2", ""),
			apply:   deum("allow-on", "v2", "") + "  allowNodesWithoutReplicaScheduling: true\n",
			want:    []string{"spec.allowNodesWithoutReplicaScheduling: Forbidden: spec.allowNodesWithoutReplicaScheduling is immutable"},
		},
		{
			name:    "spec.allowNodesWithoutReplicaScheduling turned off",
			kind:    "lhum",
			initial: deum("allow-off", "v2", "") + "  allowNodesWithoutReplicaScheduling: true\n",
			apply:   deum("allow-off", "v2", "") + "  allowNodesWithoutReplicaScheduling: false\n",
			want:    []string{"spec.allowNodesWithoutReplicaScheduling: Forbidden: spec.allowNodesWithoutReplicaScheduling is immutable"},
		},
		{
			name:    "control: spec.allowNodesWithoutReplicaScheduling false and absent are the same",
			kind:    "lhum",
			initial: deum("allow-absent", "v2", ""),
			apply:   deum("allow-absent", "v2", "") + "  allowNodesWithoutReplicaScheduling: false\n",
		},
		{
			name:    "spec.initiatorPolicy changed",
			kind:    "lhum",
			initial: deum("policy-changed", "v2", ""),
			apply:   deum("policy-changed", "v2", "") + "  initiatorPolicy: move-workloads\n",
			want:    []string{"spec.initiatorPolicy: Forbidden: spec.initiatorPolicy is immutable"},
		},
		{
			name:    "control: spec.initiatorPolicy wait and absent are the same",
			kind:    "lhum",
			initial: deum("policy-absent", "v2", ""),
			apply:   deum("policy-absent", "v2", "") + "  initiatorPolicy: wait\n",
		},
		{
			name:  "spec.initiatorPolicy unknown",
			apply: deum("policy-unknown", "v2", "") + "  initiatorPolicy: drain\n",
			want:  []string{`spec.initiatorPolicy: Unsupported value: "drain": supported values: "wait", "move-workloads"`},
		},
		{
			name:    "spec.replicaPolicy changed",
			kind:    "lhum",
			initial: deum("replicas-changed", "v2", ""),
			apply:   deum("replicas-changed", "v2", "") + "  replicaPolicy: add-first\n",
			want:    []string{"spec.replicaPolicy: Forbidden: spec.replicaPolicy is immutable"},
		},
		{
			name:    "control: spec.replicaPolicy rebuild and absent are the same",
			kind:    "lhum",
			initial: deum("replicas-absent", "v2", ""),
			apply:   deum("replicas-absent", "v2", "") + "  replicaPolicy: rebuild\n",
		},
		{
			name:  "spec.replicaPolicy unknown",
			apply: deum("replicas-unknown", "v2", "") + "  replicaPolicy: none\n",
			want:  []string{`spec.replicaPolicy: Unsupported value: "none": supported values: "rebuild", "add-first"`},
		},
		{
			name:  "duplicate node",
			apply: deum("nodes-duplicate", "v2", "[node-1, node-2, node-1]"),
			want:  []string{`spec.nodes[2]: Duplicate value: "node-1"`},
		},
		{
			name:  "node name not a DNS-1123 subdomain",
			apply: deum("nodes-invalid", "v2", "[node-1, Node_2]"),
			want:  []string{`spec.nodes[1]: Invalid value: "Node_2"`, "should match"},
		},
		{
			name:  "node name longer than 253 characters",
			apply: deum("nodes-too-long", "v2", "["+strings.Repeat("a", 254)+"]"),
			want:  []string{"spec.nodes[0]: Too long", "253"},
		},
		{
			name:  "dataEngine v1",
			apply: deum("engine-v1", "v1", ""),
			want:  []string{`spec.dataEngine: Unsupported value: "v1": supported values: "v2"`},
		},
		{
			name:  "dataEngine missing",
			apply: strings.Replace(deum("engine-missing", "v2", ""), "  dataEngine: v2\n", "  nodes: [node-1]\n", 1),
			want:  []string{"spec.dataEngine: Required value"},
		},
		{
			name:    "NDEU spec.nodeID changed",
			kind:    "lhnu",
			initial: ndeu("nodeid-changed", "node-1", "v2", imageV1, "m"),
			apply:   ndeu("nodeid-changed", "node-2", "v2", imageV1, "m"),
			want:    []string{"spec.nodeID: Forbidden: spec.nodeID is immutable"},
		},
		{
			name:    "NDEU spec.instanceManagerImage changed",
			kind:    "lhnu",
			initial: ndeu("image-changed", "node-1", "v2", imageV1, "m"),
			apply:   ndeu("image-changed", "node-1", "v2", imageV2, "m"),
			want:    []string{"spec.instanceManagerImage: Forbidden: spec.instanceManagerImage is immutable"},
		},
		{
			name:    "NDEU spec.dataEngineUpgradeManager changed",
			kind:    "lhnu",
			initial: ndeu("manager-changed", "node-1", "v2", imageV1, "m"),
			apply:   ndeu("manager-changed", "node-1", "v2", imageV1, "other"),
			want:    []string{"spec.dataEngineUpgradeManager: Forbidden: spec.dataEngineUpgradeManager is immutable"},
		},
		{
			// v2 is the only valid value, so a change is always refused by
			// the enum first (the apiserver then skips the CEL immutability
			// rule, which is there for when a second engine is allowed).
			name:    "NDEU spec.dataEngine changed",
			kind:    "lhnu",
			initial: ndeu("engine-changed", "node-1", "v2", imageV1, "m"),
			apply:   ndeu("engine-changed", "node-1", "v1", imageV1, "m"),
			want:    []string{`spec.dataEngine: Unsupported value: "v1": supported values: "v2"`},
		},
		{
			name:  "NDEU dataEngine v1",
			apply: ndeu("engine-v1", "node-1", "v1", imageV1, "m"),
			want:  []string{`spec.dataEngine: Unsupported value: "v1": supported values: "v2"`},
		},
		{
			name:  "NDEU invalid nodeID",
			apply: ndeu("nodeid-invalid", "Node_1", "v2", imageV1, "m"),
			want:  []string{`spec.nodeID: Invalid value: "Node_1"`},
		},
		{
			name:  "NDEU empty image",
			apply: ndeu("image-empty", "node-1", "v2", `""`, "m"),
			want:  []string{"spec.instanceManagerImage"},
		},
		{
			name:    "control: NDEU metadata change",
			kind:    "lhnu",
			initial: ndeu("labels", "node-1", "v2", imageV1, "m"),
			apply:   strings.Replace(ndeu("labels", "node-1", "v2", imageV1, "m"), "  namespace: NAMESPACE\n", "  namespace: NAMESPACE\n  labels: {longhorn.io/node: node-1}\n", 1),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.initial != "" {
				_, stderr, err := f.apply(tt.initial)
				require.NoError(t, err, "initial manifest must be accepted: %s", stderr)
			}
			out, stderr, err := f.apply(tt.apply)
			if len(tt.want) == 0 {
				require.NoError(t, err, "must be accepted: %s", stderr)
				return
			}
			require.Error(t, err, "must be refused, kubectl said: %s", out)
			t.Logf("kubectl: %s", strings.TrimSpace(stderr))
			for _, w := range tt.want {
				assert.Contains(t, stderr, w)
			}
			if tt.initial != "" {
				// A refused update leaves the object as it was.
				name := nameOf(tt.initial)
				gen, stderr, err := f.kubectl("", "-n", f.ns, "get", tt.kind, name, "-o", "jsonpath={.metadata.generation}")
				require.NoError(t, err, stderr)
				assert.Equal(t, "1", gen)
			}
		})
	}
}

func nameOf(manifest string) string {
	for _, l := range strings.Split(manifest, "\n") {
		if n, ok := strings.CutPrefix(l, "  name: "); ok {
			return n
		}
	}
	return ""
}

// TestInitiatorPolicyDefaultsToWait: a manager that says nothing waits for
// initiators to go, as every manager did before the field existed, and the
// apiserver writes that down.
func TestInitiatorPolicyDefaultsToWait(t *testing.T) {
	f := newFixture(t)
	var out v1beta2.DataEngineUpgradeManager
	require.NoError(t, f.create(newDEUM("policy-default", "node-1"), &out))
	assert.Equal(t, v1beta2.InitiatorPolicyWait, out.Spec.InitiatorPolicy)
}
