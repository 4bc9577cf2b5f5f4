package badinput_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/topology"
)

// manifest renders a DataEngineUpgradeManager; spec is the YAML under
// "spec:", indented by the caller, and extra is appended at top level.
func manifest(name, spec, extra string) string {
	return fmt.Sprintf(`apiVersion: longhorn.io/v1beta2
kind: DataEngineUpgradeManager
metadata:
  name: %s
  namespace: NAMESPACE
spec:
%s%s`, name, spec, extra)
}

// dnsName builds a valid DNS subdomain of exactly n characters (labels of
// at most 63, dot-separated).
func dnsName(n int) string {
	var b strings.Builder
	label := 0
	for b.Len() < n {
		if label == 63 && b.Len() < n-1 {
			b.WriteByte('.')
			label = 0
			continue
		}
		b.WriteByte(byte('a' + b.Len()%26))
		label++
	}
	return b.String()
}

// TestBadManifests applies malformed DataEngineUpgradeManagers with kubectl,
// as a user would, against the real apiserver with Switchback's CRDs: each
// is refused with a message naming the field and the rule, and nothing is
// stored.
func TestBadManifests(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	k := newKube(t, ctx)

	cases := []struct {
		name, expected, spec string
		want                 []string
	}{
		{"CR: dataEngine v1", `refused: spec.dataEngine: Unsupported value: "v1"`,
			"  dataEngine: v1\n", []string{`spec.dataEngine: Unsupported value: "v1": supported values: "v2"`}},
		{"CR: dataEngine missing", "refused: spec.dataEngine: Required value",
			"  nodes: [n1, n2]\n", []string{"spec.dataEngine: Required value"}},
		{"CR: dataEngine of the wrong type (integer)", "refused: spec.dataEngine must be of type string",
			"  dataEngine: 2\n", []string{"spec.dataEngine", "string"}},
		{"CR: dataEngine in upper case (V2)", `refused: Unsupported value: "V2"`,
			"  dataEngine: V2\n", []string{`spec.dataEngine: Unsupported value: "V2"`}},
		{"CR: node name not a DNS subdomain (Node_2)", `refused: spec.nodes[1]: Invalid value: "Node_2"`,
			"  dataEngine: v2\n  nodes: [n1, Node_2]\n", []string{`spec.nodes[1]: Invalid value: "Node_2"`, "should match"}},
		{"CR: empty node name", "refused: spec.nodes[0] at least 1 chars long",
			"  dataEngine: v2\n  nodes: [\"\", n1]\n", []string{"spec.nodes[0]", "at least 1 chars long"}},
		{"CR: duplicate node name", `refused: spec.nodes[2]: Duplicate value: "n1"`,
			"  dataEngine: v2\n  nodes: [n1, n2, n1]\n", []string{`spec.nodes[2]: Duplicate value: "n1"`}},
		{"CR: node name of 254 characters", "refused: spec.nodes[0]: Too long: may not be more than 253",
			"  dataEngine: v2\n  nodes: [" + dnsName(254) + "]\n", []string{"spec.nodes[0]: Too long", "253"}},
		{"CR: unknown spec field (nodez)", `refused: unknown field "spec.nodez"`,
			"  dataEngine: v2\n  nodez: [n1]\n", []string{`unknown field "spec.nodez"`}},
		{"CR: nodes as a string, not a list", "refused: spec.nodes must be of type array",
			"  dataEngine: v2\n  nodes: n1\n", []string{"spec.nodes", "array"}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCase(t, tc.name, tc.expected)
			name := fmt.Sprintf("bad-%d", i)
			out, err := k.apply(ctx, manifest(name, tc.spec, ""))
			require.Error(t, err, "kubectl apply must fail; it said: %s", out)
			for _, w := range tc.want {
				assert.Contains(t, out, w)
			}
			_, gerr := k.kc.Managers(k.ns).Get(ctx, name)
			assert.True(t, isNotFound(gerr), "nothing was stored: %v", gerr)
			c.Got("refused: %s", lineWith(out, tc.want[0]))
		})
	}
}

// lineWith returns the line of kubectl's output that holds want, trimmed of
// kubectl's bullet, or the last line.
func lineWith(out, want string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, want) {
			// Keep the part that names the field: drop kubectl's preamble.
			for _, cut := range []string{" is invalid: ", "cannot be handled as a DataEngineUpgradeManager: "} {
				if _, after, ok := strings.Cut(l, cut); ok {
					l = after
				}
			}
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "*"))
		}
	}
	return lastLine(out)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// TestChangesToAnExistingManager: the spec is immutable and the status is
// the controller's; a user trying either keeps the manager as it was.
func TestChangesToAnExistingManager(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	k := newKube(t, ctx)

	t.Run("spec.nodes changed", func(t *testing.T) {
		c := newCase(t, "CR: spec.nodes changed after creation", "refused: spec.nodes is immutable; spec unchanged")
		_, err := k.apply(ctx, manifest("immutable", "  dataEngine: v2\n  nodes: [n1, n2]\n", ""))
		require.NoError(t, err)
		out, err := k.apply(ctx, manifest("immutable", "  dataEngine: v2\n  nodes: [n1, n3]\n", ""))
		require.Error(t, err)
		assert.Contains(t, out, "spec.nodes: Forbidden: spec.nodes is immutable")
		obj, err := k.kc.Managers(k.ns).Get(ctx, "immutable")
		require.NoError(t, err)
		assert.Equal(t, []string{"n1", "n2"}, obj.Spec.Nodes, "the stored spec is unchanged")
		assert.Equal(t, int64(1), obj.Generation)
		c.Got("refused: %s", lineWith(out, "spec.nodes: Forbidden"))
	})

	t.Run("status through the main resource", func(t *testing.T) {
		c := newCase(t, "CR: status written through the main resource",
			"ignored: apply succeeds, the status stays the controller's")
		_, err := k.apply(ctx, manifest("status-main", "  dataEngine: v2\n", ""))
		require.NoError(t, err)
		before, err := k.kc.Managers(k.ns).Get(ctx, "status-main")
		require.NoError(t, err)
		out, err := k.apply(ctx, manifest("status-main", "  dataEngine: v2\n",
			"status:\n  state: completed\n  message: done by hand\n  streamSequence: 999\n"))
		require.NoError(t, err, out)
		after, err := k.kc.Managers(k.ns).Get(ctx, "status-main")
		require.NoError(t, err)
		assert.Equal(t, before.Status, after.Status, "the status subresource ignores status in writes of the main resource")
		assert.Empty(t, after.Status.State)
		// A plain update through the typed client, too.
		upd := after.DeepCopy()
		upd.Status.State = v1beta2.UpgradeStateCompleted
		got, err := k.kc.Managers(k.ns).Update(ctx, upd)
		require.NoError(t, err)
		assert.Empty(t, got.Status.State, "an update of the main resource drops the status")
		c.Got("kubectl said %q; status unchanged (state %q)", lastLine(out), after.Status.State)
	})
}

// TestVeryLongNodeName: a node name of 253 characters is a valid
// Kubernetes name (so the CRD must accept it) and must be upgradable.
func TestVeryLongNodeName(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	c := newCase(t, "CR+engine: node name of 253 characters (valid)",
		"accepted, and the node's worker gets its queue")
	k := newKube(t, ctx)
	long := dnsName(253)
	require.Len(t, long, 253)
	out, err := k.apply(ctx, manifest("long-node", "  dataEngine: v2\n  nodes: [n1, "+long+"]\n", ""))
	require.NoError(t, err, "the CRD accepts a valid 253-character node name: %s", out)

	// The first thing the node's worker does: open its durable consumer.
	e := engineOnly(t, nil)
	_, err = e.Queue.NodeConsumer(ctx, long)
	if err != nil {
		c.Got("CRD accepts it; the worker cannot open its queue: %v", err)
		c.Bug("topology.NodeConsumer(%d-char node) is %d characters, over JetStream's 255-character limit (also the "+
			"file store's directory name limit): the worker exits at start, the manager stays 'upgrading' that node "+
			"forever with no stall and no error. Fix: in topology.NodeConsumer, keep names <= 255 by shortening long "+
			"tokens with a hash suffix (e.g. worker-<first 200 chars>-<10 hex of sha256(node)>), as projector.NodeUpgradeName does",
			len(long), len(topology.NodeConsumer(long)))
	}
	c.Got("accepted; consumer %d chars", len(topology.NodeConsumer(long)))
}
