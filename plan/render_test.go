package plan

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestPlanString(t *testing.T) {
	c := cluster3(
		attached("a", "node-1", "node-1", "node-3"),
		attached("b", "node-1", "node-1", "node-2"),
		attached("c", "node-3", "node-1", "node-3"),
		detached("d", "node-2", "node-3"),
	)
	want := `Plan: 3 node(s) to instance-manager image im:v2

ORDER  NODE    IMAGE NOW  SWITCH-OVERS  REPLICAS TO FAIL  DETACHED VOLUMES
1      node-2  im:v1      0             2                 1
2      node-3  im:v1      1             3                 1
3      node-1  im:v1      2             3                 0

Switch-overs (the initiator stays on the attached node):
ORDER  NODE    VOLUME  ATTACHED  TEMPORARY TARGET  WHY
2      node-3  c       node-3    node-2            node-2 runs the target image im:v2, holds no healthy replica of c and hosts 0 other target(s)
3      node-1  a       node-1    node-3            node-3 runs the target image im:v2, holds a healthy replica of a and hosts 1 other target(s)
3      node-1  b       node-1    node-2            node-2 runs the target image im:v2, holds a healthy replica of b and hosts 0 other target(s)

Replicas to fail and rebuild (v2 only):
  node-2: b/b-r-node-2, d/d-r-node-2
  node-3: a/a-r-node-3, c/c-r-node-3, d/d-r-node-3
  node-1: a/a-r-node-1, b/b-r-node-1, c/c-r-node-1

Detached volumes moved to the target image:
  node-2: d
  node-3: d
`
	assert.Equal(t, want, Build(c, nil, newIM).String())
}

func TestPlanStringInfeasibleAndEmpty(t *testing.T) {
	c := cluster3(attached("vol", "node-1", "node-1", "node-2"))
	c.Nodes[1].Ready = false
	c.Nodes[2].Ready = false
	c.InstanceManagers = c.InstanceManagers[1:]
	want := `Plan: 2 node(s) to instance-manager image im:v2
Warning: the plan cannot complete as is (see below)

ORDER  NODE    IMAGE NOW       SWITCH-OVERS  REPLICAS TO FAIL  DETACHED VOLUMES
1      ghost   (unknown node)  0             0                 0
2      node-1  -               1             1                 0

Switch-overs (the initiator stays on the attached node):
ORDER  NODE    VOLUME  ATTACHED  TEMPORARY TARGET  WHY
2      node-1  vol     node-1    -                 no node can host the target of vol while node-1 is upgraded: node-1 is the node being upgraded; node-2 is not ready; node-3 is not ready

Replicas to fail and rebuild (v2 only):
  node-1: vol/vol-r-node-1
`
	assert.Equal(t, want, Build(c, []string{"node-1", "ghost"}, newIM).String())
	assert.Equal(t, "Plan: no node to upgrade to im:v2\n", Build(Cluster{}, nil, newIM).String())
	assert.Equal(t, "Plan: no node to upgrade to -\n", Plan{}.String())
}
