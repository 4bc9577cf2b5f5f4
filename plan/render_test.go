package plan

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/switchback-dev/switchback/dataplane"
)

func TestPlanString(t *testing.T) {
	c := wholeCluster()
	want := `Longhorn: in-place: initiators survive their node's instance-manager update: every node can be upgraded live once its targets moved away
Plan: 3 node(s) to instance-manager image im:v2

ORDER  NODE    IMAGE NOW  LIVE ON THIS LONGHORN  SWITCH-OVERS  REPLICAS TO FAIL
1      node-2  im:v1      yes                    0             1
2      node-3  im:v1      yes                    1             2
3      node-1  im:v1      yes                    2             3

Switch-overs (the initiator stays on the attached node):
ORDER  NODE    VOLUME  ATTACHED  MULTIPATH  TEMPORARY TARGET  WHY
2      node-3  c       node-3    ?          node-2            node-2 runs the target image im:v2, holds no healthy replica of c and hosts 0 other target(s)
3      node-1  a       node-1    ?          node-3            node-3 runs the target image im:v2, holds a healthy replica of a and hosts 1 other target(s)
3      node-1  b       node-1    ?          node-2            node-2 runs the target image im:v2, holds a healthy replica of b and hosts 0 other target(s)
  (MULTIPATH: the attached node's nvme_core.multipath as its worker reported it; N holds the switch-over until fixed; ? is not reported yet, taken as Y)

Replicas to fail and rebuild (attached v2 volumes only):
  node-2: b/b-r-node-2
  node-3: a/a-r-node-3, c/c-r-node-3
  node-1: a/a-r-node-1, b/b-r-node-1, c/c-r-node-1

Served from a single healthy replica while the node is upgraded:
  node-2: b
  node-3: a, c
  node-1: a, b, c
`
	assert.Equal(t, want, Build(c, nil, newIM).String())
}

// On v1.12 the plan says which nodes can be upgraded live, why the others
// cannot, and what v1.12's defaults mean for that.
func TestPlanStringV112(t *testing.T) {
	engineOn := func(v dataplane.Volume, node string) dataplane.Volume {
		v.EngineNode, v.TargetNode = node, node
		return v
	}
	// a's initiator node reported no native NVMe multipath: its
	// switch-over is held, with the remedy.
	a := engineOn(attached("a", "node-1", "node-2", "node-3"), "node-2")
	a.InitiatorMultipath = dataplane.MultipathOff
	c := cluster3(a, attached("b", "node-1", "node-1", "node-2", "node-3"))
	c.Platform = dataplane.Platform{Profile: dataplane.ProfileV112, LonghornVersion: "v1.12.1"}
	want := `Longhorn: v1.12 (Longhorn v1.12.1): an engine follows its volume's attachment node unless spec.engineNodeID says otherwise, so by default a node with attached v2 volumes holds both their initiators and their targets and cannot be upgraded live; nodes holding only replicas, or targets of volumes attached elsewhere, can
Plan: 3 node(s) to instance-manager image im:v2
Warning: the plan cannot complete as is (see below)

ORDER  NODE    IMAGE NOW  LIVE ON THIS LONGHORN       SWITCH-OVERS  REPLICAS TO FAIL
1      node-3  im:v1      yes                         0             2
2      node-2  im:v1      yes                         1             2
3      node-1  im:v1      no (initiators, see below)  1             1

Switch-overs (the initiator stays on the attached node):
ORDER  NODE    VOLUME  ATTACHED  MULTIPATH  TEMPORARY TARGET  WHY
2      node-2  a       node-1    N          -                 volume a is attached to node-1, whose kernel does not keep two NVMe paths under one device (nvme_core.multipath is N): a switch-over would leave the volume without a usable path; boot node-1 with nvme_core.multipath=Y, or detach the volume, and the upgrade goes on by itself
3      node-1  b       node-1    ?          node-3            node-3 runs the target image im:v2, holds a healthy replica of b and hosts 0 other target(s)
  (MULTIPATH: the attached node's nvme_core.multipath as its worker reported it; N holds the switch-over until fixed; ? is not reported yet, taken as Y)

Replicas to fail and rebuild (attached v2 volumes only):
  node-3: a/a-r-node-3, b/b-r-node-3
  node-2: a/a-r-node-2, b/b-r-node-2
  node-1: b/b-r-node-1

Not live on this Longhorn (the upgrade stalls there, touching nothing, until fixed):
  node-1: node node-1 holds the initiators of attached v2 volumes a, b: on Longhorn v1.12 an initiator runs in the instance manager of the node its volume is attached to, and replacing that instance manager would fault those volumes; detach them or move their workloads to another node (or run a Longhorn that updates instance managers in place), and the upgrade goes on by itself

Served from a single healthy replica while the node is upgraded:
  node-3: a
  node-2: a
`
	assert.Equal(t, want, Build(c, nil, newIM).String())
}

func TestPlanStringInfeasibleAndEmpty(t *testing.T) {
	c := cluster3(attached("vol", "node-1", "node-1", "node-2"))
	c.Nodes[1].Ready = false
	c.Nodes[2].Ready = false
	c.InstanceManagers = c.InstanceManagers[1:]
	want := `Longhorn: in-place: initiators survive their node's instance-manager update: every node can be upgraded live once its targets moved away
Plan: 2 node(s) to instance-manager image im:v2
Warning: the plan cannot complete as is (see below)

ORDER  NODE    IMAGE NOW       LIVE ON THIS LONGHORN  SWITCH-OVERS  REPLICAS TO FAIL
1      ghost   (unknown node)  -                      0             0
2      node-1  -               yes                    1             1

Switch-overs (the initiator stays on the attached node):
ORDER  NODE    VOLUME  ATTACHED  MULTIPATH  TEMPORARY TARGET  WHY
2      node-1  vol     node-1    ?          -                 no node can host the target of vol while node-1 is upgraded: node-1 is the node being upgraded; node-2 is not ready; node-3 is not ready
  (MULTIPATH: the attached node's nvme_core.multipath as its worker reported it; N holds the switch-over until fixed; ? is not reported yet, taken as Y)

Replicas to fail and rebuild (attached v2 volumes only):
  node-1: vol/vol-r-node-1

Served from a single healthy replica while the node is upgraded:
  node-1: vol
`
	assert.Equal(t, want, Build(c, []string{"node-1", "ghost"}, newIM).String())
	assert.Equal(t, "Plan: no node to upgrade to im:v2\n", Build(Cluster{}, nil, newIM).String())
	assert.Equal(t, "Plan: no node to upgrade to -\n", Plan{}.String())
}

// A node held as the cluster is now says so in its row and, with the
// remedy, in a section of its own; a node already on the target image is
// held by nothing.
func TestPlanStringHolds(t *testing.T) {
	c := cluster3()
	c.Platform = dataplane.Platform{Profile: dataplane.ProfileV112, LonghornVersion: "v1.12.1"}
	c.Nodes[0].Cordoned = true
	c.Nodes[1].ManagerIMImage = oldIM
	c.Nodes[2].Cordoned = true
	c.InstanceManagers[2].Image = newIM
	want := `Longhorn: v1.12 (Longhorn v1.12.1): an engine follows its volume's attachment node unless spec.engineNodeID says otherwise, so by default a node with attached v2 volumes holds both their initiators and their targets and cannot be upgraded live; nodes holding only replicas, or targets of volumes attached elsewhere, can
Plan: 3 node(s) to instance-manager image im:v2
Warning: the plan cannot complete as is (see below)

ORDER  NODE    IMAGE NOW  LIVE ON THIS LONGHORN  SWITCH-OVERS  REPLICAS TO FAIL
1      node-1  im:v1      held (see below)       0             0
2      node-2  im:v1      held (see below)       0             0
3      node-3  im:v2      yes                    0             0

Held as the cluster is now (the upgrade waits there, touching nothing, until fixed):
  node-1: NodeCordoned: node node-1 is cordoned (spec.unschedulable): Longhorn starts no instance-manager pod on a cordoned node, so its instance manager is not replaced; uncordon it (Switchback never does) and the upgrade goes on by itself
  node-2: ManagerNotRolledOut: node node-2: its longhorn-manager runs with --instance-manager-image im:v1, and Longhorn creates an instance manager of im:v2 there only once its manager runs with that image: let the longhorn-manager DaemonSet roll out on the node, and the upgrade goes on by itself
`
	assert.Equal(t, want, Build(c, nil, newIM).String())
}

// With the volumes' sizes reported, the plan shows per node what whole
// copies would be and what the hashing reads first: each volume is hashed
// on the first node holding one of its replicas only.
func TestPlanStringRebuildBytes(t *testing.T) {
	a := attached("a", "node-1", "node-1", "node-2")
	a.ActualSize = 100 << 30
	b := attached("b", "node-2", "node-2", "node-3")
	b.ActualSize = 10 << 30
	b.Hashing.Disabled = true
	p := Build(cluster3(a, b), nil, newIM) // node-3, node-1, node-2
	assert.Equal(t, []int64{10 << 30, 100 << 30, 110 << 30}, []int64{p.Nodes[0].FullCopyBytes, p.Nodes[1].FullCopyBytes, p.Nodes[2].FullCopyBytes})
	assert.Equal(t, []int64{0, 100 << 30, 0}, []int64{p.Nodes[0].HashBytes, p.Nodes[1].HashBytes, p.Nodes[2].HashBytes},
		"a hashed on its first node only; b cannot hash")
	assert.Equal(t, []int64{10 << 30, 0, 10 << 30}, []int64{p.Nodes[0].ExpectedBytes, p.Nodes[1].ExpectedBytes, p.Nodes[2].ExpectedBytes},
		"b copies whole; a only what is written while away")
	assert.Contains(t, p.String(), "ORDER  NODE    WHOLE COPIES  EXPECTED (+ WRITTEN WHILE AWAY)  HASHED FIRST (ON EACH REPLICA)\n"+
		"1      node-3  10.0 GiB      10.0 GiB                         0 B\n"+
		"2      node-1  100 GiB       0 B                              100 GiB\n"+
		"3      node-2  110 GiB       10.0 GiB                         0 B\n")
}

// A replica-replenishment-wait-interval shorter than a node's time away
// is a warning naming the nodes whose replicas it costs and what to set;
// at Longhorn's default, or when it is not known, none.
func TestPlanReplenishWarning(t *testing.T) {
	c := cluster3(attached("a", "node-1", "node-1", "node-2"))
	for _, tc := range []struct {
		name string
		wait *dataplane.RebuildSettings
		want []string
	}{
		{name: "not read", wait: nil},
		{name: "Longhorn's default", wait: &dataplane.RebuildSettings{ReplenishWait: 10 * time.Minute}},
		{name: "never", wait: &dataplane.RebuildSettings{ReplenishWait: -1}},
		{name: "a minute", wait: &dataplane.RebuildSettings{ReplenishWait: time.Minute}, want: []string{
			"Longhorn's replica-replenishment-wait-interval is 60 s, shorter than the about 5m0s a node's replicas are away (targets moved off and back, its instance manager replaced): " +
				"on node-2, node-1 Longhorn would build each failed replica again on another node, a whole copy, and a switch-over waits while one is due; set it to at least 300 for the upgrade"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.Rebuild = tc.wait
			p := Build(c, nil, newIM)
			assert.Equal(t, tc.want, p.Warnings)
			for _, w := range tc.want {
				assert.Contains(t, p.String(), "Warning: "+w+"\n")
			}
		})
	}
}
