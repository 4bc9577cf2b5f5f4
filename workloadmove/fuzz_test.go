package workloadmove

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/test/harness/fuzzinput"
)

// randomWorkloads builds a small cluster around n1 from the fuzzer's
// choices, and the engine frontends its instance manager lists.
func randomWorkloads(c *fuzzinput.Choices) (dataplane.Workloads, int) {
	nodes := []string{"n1", "n2", ""}
	o := dataplane.Workloads{Node: "n1", Budgets: map[string]dataplane.Budget{}}
	frontends := c.Pick(2)
	if c.Pick(6) == 0 {
		o.CSIPluginNotReady = "the longhorn-csi-plugin pod is not Ready"
	}
	if c.Pick(6) == 0 {
		o.RolloutPending = "DaemonSet longhorn-manager rolling out"
	}
	for i := range 1 + c.Pick(3) {
		name := fmt.Sprintf("b%d", i)
		o.Budgets["app/"+name] = dataplane.Budget{ObjectRef: dataplane.ObjectRef{Namespace: "app", Name: name}, Observed: c.Coin(), DisruptionsAllowed: int32(c.Pick(3))}
	}
	for i := range 1 + c.Pick(5) {
		v := dataplane.Volume{Name: fmt.Sprintf("v%d", i), DataEngine: []string{"v1", "v2", "v2", "v2"}[c.Pick(4)], AttachedNode: nodes[c.Pick(3)],
			ShareManager: c.Pick(4) == 0, Migratable: c.Pick(8) == 0, StrictLocal: c.Pick(8) == 0}
		for range c.Pick(3) {
			typ := []string{dataplane.AttacherCSI, dataplane.AttacherCSI, dataplane.AttacherShareManager, dataplane.AttacherLonghornAPI,
				dataplane.AttacherSnapshot, "volume-rebuilding-controller"}[c.Pick(6)]
			v.Tickets = append(v.Tickets, dataplane.Ticket{ID: fmt.Sprintf("%s-%d", typ, len(v.Tickets)), Type: typ, Node: nodes[c.Pick(2)]})
		}
		o.Volumes = append(o.Volumes, v)
		o.Claims = append(o.Claims, dataplane.Claim{ObjectRef: dataplane.ObjectRef{Namespace: "app", Name: "c" + v.Name}, Volume: v.Name})
		if v.ShareManager && c.Coin() {
			o.Pods = append(o.Pods, dataplane.Pod{ObjectRef: dataplane.ObjectRef{Namespace: "longhorn-system", Name: "share-manager-" + v.Name},
				Node: nodes[c.Pick(2)], Controller: "ShareManager", ShareManagerOf: v.Name, Deleting: c.Pick(4) == 0, ToleratesTaint: c.Pick(6) == 0})
		}
	}
	for i := range c.Pick(7) {
		p := dataplane.Pod{ObjectRef: dataplane.ObjectRef{Namespace: "app", Name: fmt.Sprintf("p%d", i)}, Node: nodes[c.Pick(3)],
			Controller: []string{"ReplicaSet", "StatefulSet", "DaemonSet", ""}[c.Pick(4)],
			Terminal:   c.Pick(8) == 0, Deleting: c.Pick(8) == 0, Mirror: c.Pick(10) == 0, ToleratesTaint: c.Pick(8) == 0}
		if c.Pick(8) == 0 {
			p.PinnedBy = "nodeName"
		}
		for range 1 + c.Pick(2) {
			p.Claims = append(p.Claims, fmt.Sprintf("cv%d", c.Pick(len(o.Volumes)+1)))
		}
		for range c.Pick(3) {
			b := fmt.Sprintf("app/b%d", c.Pick(3))
			if !slices.Contains(p.Budgets, b) {
				p.Budgets = append(p.Budgets, b)
			}
		}
		o.Pods = append(o.Pods, p)
	}
	return o, frontends
}

// shuffled is o with every list in another order.
func shuffled(o dataplane.Workloads, seed uint64) dataplane.Workloads {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	o.Pods, o.Claims, o.Volumes = slices.Clone(o.Pods), slices.Clone(o.Claims), slices.Clone(o.Volumes)
	r.Shuffle(len(o.Pods), func(i, j int) { o.Pods[i], o.Pods[j] = o.Pods[j], o.Pods[i] })
	r.Shuffle(len(o.Claims), func(i, j int) { o.Claims[i], o.Claims[j] = o.Claims[j], o.Claims[i] })
	r.Shuffle(len(o.Volumes), func(i, j int) { o.Volumes[i], o.Volumes[j] = o.Volumes[j], o.Volumes[i] })
	for i := range o.Volumes {
		v := &o.Volumes[i]
		v.Tickets = slices.Clone(v.Tickets)
		r.Shuffle(len(v.Tickets), func(i, j int) { v.Tickets[i], v.Tickets[j] = v.Tickets[j], v.Tickets[i] })
	}
	return o
}

// FuzzDecide holds every move to the rules a careful operator keeps: only
// pods bound to the node that use a v2 volume held there are evicted, never
// one that would not come back, would come straight back or is going
// already; only share-managers of such RWX volumes are restarted; a pinned
// node is not touched at all; no budget is asked for more than it allows
// (or one); done means nothing is left; the answer does not depend on the
// order of what was observed.
func FuzzDecide(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20})
	f.Add([]byte("a pod, a volume, a budget and a ticket or two, chosen byte by byte"))
	f.Fuzz(func(t *testing.T, data []byte) {
		o, frontends := randomWorkloads(fuzzinput.New(data))
		m := Decide(o, frontends)
		require.Equal(t, m, Decide(shuffled(o, uint64(len(data))), frontends), "the order of the observation changed the move")

		vols := map[string]dataplane.Volume{}
		for _, v := range o.Volumes {
			vols[v.Name] = v
		}
		claims := map[dataplane.ObjectRef]string{}
		for _, c := range o.Claims {
			claims[c.ObjectRef] = c.Volume
		}
		pods := map[dataplane.ObjectRef]dataplane.Pod{}
		for _, p := range o.Pods {
			pods[p.ObjectRef] = p
		}
		heldHere := func(name string) bool {
			v, ok := vols[name]
			if !ok || v.DataEngine != dataplane.DataEngineV2 {
				return false
			}
			return v.AttachedNode == o.Node || slices.ContainsFunc(v.Tickets, func(t dataplane.Ticket) bool { return t.Node == o.Node })
		}
		if o.CSIPluginNotReady != "" || o.RolloutPending != "" {
			assert.Empty(t, m.Evict, "nothing moves while Longhorn is not ready on the node")
			assert.Empty(t, m.Restart, "nothing moves while Longhorn is not ready on the node")
		}
		if len(m.Pins) > 0 {
			assert.Empty(t, m.Evict, "a pinned node is not touched")
			assert.Empty(t, m.Deferred, "a pinned node is not touched")
			assert.Empty(t, m.Restart, "a pinned node is not touched")
		}
		perBudget := map[string]int32{}
		if len(m.Deferred) > 0 {
			assert.NotEmpty(t, m.Evict, "a round defers only behind an eviction it asks")
		}
		for _, e := range append(slices.Clone(m.Evict), m.Deferred...) {
			p := pods[e.Pod]
			assert.Equal(t, o.Node, p.Node, "evicted a pod of another node")
			assert.False(t, p.Terminal || p.Deleting || p.Mirror || p.ToleratesTaint || p.PinnedBy != "", "evicted %v", p)
			assert.NotContains(t, []string{"", "DaemonSet"}, p.Controller, "evicted a pod that would not move")
			assert.LessOrEqual(t, len(p.Budgets), 1, "evicted a pod two budgets select")
			require.NotEmpty(t, e.Volumes)
			for _, v := range e.Volumes {
				assert.True(t, heldHere(v), "evicted %s for volume %s, not held on the node", e.Pod, v)
				assert.False(t, vols[v].ShareManager, "evicted an NFS client of %s", v)
				uses := slices.ContainsFunc(p.Claims, func(c string) bool { return claims[dataplane.ObjectRef{Namespace: p.Namespace, Name: c}] == v })
				assert.True(t, uses, "evicted %s for a volume it does not use", e.Pod)
			}
		}
		for _, e := range m.Evict {
			for _, b := range e.Budgets {
				perBudget[b]++
			}
		}
		for b, n := range perBudget {
			assert.LessOrEqual(t, n, max(o.Budgets[b].DisruptionsAllowed, 1), "budget %s asked too much", b)
		}
		for _, r := range m.Restart {
			p := pods[r.Pod]
			assert.Equal(t, r.Volume, p.ShareManagerOf)
			assert.Equal(t, o.Node, p.Node)
			assert.False(t, p.Deleting || p.ToleratesTaint)
			assert.True(t, heldHere(r.Volume) && vols[r.Volume].ShareManager)
		}
		if m.Done {
			assert.Empty(t, m.Evict)
			assert.Empty(t, m.Restart)
			assert.Empty(t, m.Pins)
			assert.Empty(t, m.Waits)
			assert.Zero(t, frontends)
			for name := range vols {
				assert.False(t, heldHere(name), "done with %s held on the node", name)
			}
		} else {
			assert.Positive(t, len(m.Pins)+len(m.Waits)+len(m.Evict)+len(m.Restart), "not done, and nothing to do or to say why")
		}
	})
}
