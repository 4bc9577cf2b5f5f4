package workloadmove

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/switchback-dev/switchback/dataplane"
)

// cluster builds the workloads around node n1 in namespace app.
type cluster struct {
	o         dataplane.Workloads
	frontends int
}

func around() *cluster {
	return &cluster{o: dataplane.Workloads{Node: "n1", Budgets: map[string]dataplane.Budget{}}}
}

func ref(ns, name string) dataplane.ObjectRef { return dataplane.ObjectRef{Namespace: ns, Name: name} }

// v1 makes a volume a v1 one.
func v1(v *dataplane.Volume) { v.DataEngine = "v1" }

// volume adds a v2 volume attached to node, with its workload's ticket
// there, and the claim of the same name that binds it.
func (c *cluster) volume(name, node string, edit ...func(*dataplane.Volume)) *cluster {
	v := dataplane.Volume{Name: name, DataEngine: dataplane.DataEngineV2, AttachedNode: node}
	for _, e := range edit {
		e(&v)
	}
	c.o.Volumes = append(c.o.Volumes, v)
	c.o.Claims = append(c.o.Claims, dataplane.Claim{ObjectRef: ref("app", name), Volume: name})
	if node != "" {
		typ := dataplane.AttacherCSI
		if v.ShareManager {
			typ = dataplane.AttacherShareManager
		}
		c.ticket(name, typ, node)
	}
	return c
}

func (c *cluster) ticket(vol, typ, node string) *cluster {
	for i := range c.o.Volumes {
		if v := &c.o.Volumes[i]; v.Name == vol {
			v.Tickets = append(v.Tickets, dataplane.Ticket{ID: typ + "-" + vol, Type: typ, Node: node})
		}
	}
	return c
}

// pod adds a ReplicaSet's pod on node using claims.
func (c *cluster) pod(name, node string, claims []string, edit ...func(*dataplane.Pod)) *cluster {
	p := dataplane.Pod{ObjectRef: ref("app", name), Node: node, Controller: "ReplicaSet", Claims: claims}
	for _, e := range edit {
		e(&p)
	}
	c.o.Pods = append(c.o.Pods, p)
	return c
}

func (c *cluster) budget(name string, allowed int32, pods ...string) *cluster {
	c.o.Budgets["app/"+name] = dataplane.Budget{ObjectRef: ref("app", name), Observed: true, DisruptionsAllowed: allowed}
	for i := range c.o.Pods {
		for _, p := range pods {
			if c.o.Pods[i].Name == p {
				c.o.Pods[i].Budgets = append(c.o.Pods[i].Budgets, "app/"+name)
			}
		}
	}
	return c
}

func evict(pod string, vols ...string) Eviction { return Eviction{Pod: ref("app", pod), Volumes: vols} }

func reasons(s []Stall) []string {
	var out []string
	for _, x := range s {
		out = append(out, x.Reason+" "+x.Object)
	}
	return out
}

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name    string
		c       *cluster
		evict   []Eviction
		later   []Eviction
		restart []Restart
		pins    []string
		waits   []string
		done    bool
	}{
		{name: "nothing on the node", c: around(), done: true},
		{
			name:  "a Deployment's pod with an RWO volume attached there is evicted",
			c:     around().volume("data", "n1").pod("web-1", "n1", []string{"data"}),
			evict: []Eviction{evict("web-1", "data")},
		},
		{
			name: "a v1 volume holds no v2 initiator",
			c:    around().volume("data", "n1", v1).pod("web-1", "n1", []string{"data"}),
			done: true,
		},
		{
			name: "a pod whose volume is attached elsewhere is left alone",
			c:    around().volume("data", "n2").pod("web-1", "n1", []string{"data"}),
			done: true,
		},
		{
			name:  "one eviction for a pod using two volumes",
			c:     around().volume("a", "n1").volume("b", "n1").pod("db-0", "n1", []string{"a", "b"}, func(p *dataplane.Pod) { p.Controller = "StatefulSet" }),
			evict: []Eviction{evict("db-0", "a", "b")},
		},
		{
			name: "a DaemonSet's pod pins the node, and nothing else is moved",
			c: around().volume("a", "n1").volume("b", "n1").
				pod("agent", "n1", []string{"a"}, func(p *dataplane.Pod) { p.Controller = "DaemonSet" }).pod("web-1", "n1", []string{"b"}),
			pins: []string{"DaemonSetPod app/agent"},
		},
		{
			name: "a bare pod would not come back",
			c:    around().volume("a", "n1").pod("job", "n1", []string{"a"}, func(p *dataplane.Pod) { p.Controller = "" }),
			pins: []string{"PodWithoutController app/job"},
		},
		{
			name: "a static pod",
			c:    around().volume("a", "n1").pod("etcd", "n1", []string{"a"}, func(p *dataplane.Pod) { p.Mirror = true }),
			pins: []string{"StaticPod app/etcd"},
		},
		{
			name: "a pod only this node may run",
			c:    around().volume("a", "n1").pod("web-1", "n1", []string{"a"}, func(p *dataplane.Pod) { p.PinnedBy = "nodeSelector kubernetes.io/hostname=n1" }),
			pins: []string{"PodPinnedToNode app/web-1"},
		},
		{
			name: "a pod that tolerates the taint",
			c:    around().volume("a", "n1").pod("web-1", "n1", []string{"a"}, func(p *dataplane.Pod) { p.ToleratesTaint = true }),
			pins: []string{"PodToleratesTaint app/web-1"},
		},
		{
			name: "a pod two budgets select",
			c:    around().volume("a", "n1").pod("web-1", "n1", []string{"a"}).budget("one", 1, "web-1").budget("two", 1, "web-1"),
			pins: []string{"SeveralDisruptionBudgets app/web-1"},
		},
		{
			name: "a strict-local volume",
			c:    around().volume("a", "n1", func(v *dataplane.Volume) { v.StrictLocal = true }).pod("web-1", "n1", []string{"a"}),
			pins: []string{"StrictLocalVolume a"},
		},
		{
			name: "a migratable volume",
			c:    around().volume("a", "n1", func(v *dataplane.Volume) { v.Migratable = true }).pod("vm", "n1", []string{"a"}),
			pins: []string{"MigratableVolume a"},
		},
		{
			name: "a volume attached by hand through Longhorn's API",
			c:    around().volume("a", "").ticket("a", dataplane.AttacherLonghornAPI, "n1"),
			pins: []string{"ManualAttachment a"},
		},
		{
			name:  "Longhorn's snapshot of a detached volume waits, and a workload still moves",
			c:     around().volume("a", "").ticket("a", dataplane.AttacherSnapshot, "n1").volume("b", "n1").pod("web-1", "n1", []string{"b"}),
			evict: []Eviction{evict("web-1", "b")},
			waits: []string{"LonghornTicketOnNode a"},
		},
		{
			name: "an RWX volume: its share-manager is restarted elsewhere, its NFS clients stay",
			c: around().volume("shared", "n1", func(v *dataplane.Volume) { v.ShareManager = true }).
				pod("web-1", "n1", []string{"shared"}).
				pod("share-manager-shared", "n1", nil, func(p *dataplane.Pod) {
					p.Namespace, p.ShareManagerOf, p.Controller = "longhorn-system", "shared", "ShareManager"
				}),
			restart: []Restart{{Pod: ref("longhorn-system", "share-manager-shared"), Volume: "shared"}},
		},
		{
			name: "an RWX volume served from another node: its NFS client here holds nothing, the node is done",
			c: around().volume("shared", "n2", func(v *dataplane.Volume) { v.ShareManager = true }).
				ticket("shared", dataplane.AttacherCSI, "n1").
				pod("web-1", "n1", []string{"shared"}),
			done: true,
		},
		{
			name: "an RWX volume whose share-manager tolerates the taint",
			c: around().volume("shared", "n1", func(v *dataplane.Volume) { v.ShareManager = true }).
				pod("share-manager-shared", "n1", nil, func(p *dataplane.Pod) {
					p.Namespace, p.ShareManagerOf, p.ToleratesTaint = "longhorn-system", "shared", true
				}),
			pins: []string{"PodToleratesTaint longhorn-system/share-manager-shared"},
		},
		{
			name: "an RWX volume whose share-manager is being deleted",
			c: around().volume("shared", "n1", func(v *dataplane.Volume) { v.ShareManager = true }).
				pod("share-manager-shared", "n1", nil, func(p *dataplane.Pod) { p.Namespace, p.ShareManagerOf, p.Deleting = "longhorn-system", "shared", true }),
			waits: []string{"PodTerminating longhorn-system/share-manager-shared"},
		},
		{
			name:  "a pod being deleted is waited for",
			c:     around().volume("a", "n1").pod("web-1", "n1", []string{"a"}, func(p *dataplane.Pod) { p.Deleting = true }),
			waits: []string{"PodTerminating app/web-1"},
		},
		{
			name:  "no pod uses it any more: the detach is waited for",
			c:     around().volume("a", "n1"),
			waits: []string{"WaitingForDetach a"},
		},
		{
			name: "a budget allowing one disruption lets one of its pods go a round",
			c: around().volume("a", "n1").volume("b", "n1").volume("c", "n1").
				pod("db-0", "n1", []string{"a"}).pod("db-1", "n1", []string{"b"}).pod("web", "n1", []string{"c"}).budget("db", 1, "db-0", "db-1"),
			evict: []Eviction{{Pod: ref("app", "db-0"), Volumes: []string{"a"}, Budgets: []string{"app/db"}}, evict("web", "c")},
			later: []Eviction{{Pod: ref("app", "db-1"), Volumes: []string{"b"}, Budgets: []string{"app/db"}}},
		},
		{
			name:  "a budget allowing none still asks for one, for the API's answer",
			c:     around().volume("a", "n1").volume("b", "n1").pod("db-0", "n1", []string{"a"}).pod("db-1", "n1", []string{"b"}).budget("db", 0, "db-0", "db-1"),
			evict: []Eviction{{Pod: ref("app", "db-0"), Volumes: []string{"a"}, Budgets: []string{"app/db"}}},
			later: []Eviction{{Pod: ref("app", "db-1"), Volumes: []string{"b"}, Budgets: []string{"app/db"}}},
		},
		{
			name: "Longhorn's CSI plugin not Ready there: nothing moves yet",
			c: func() *cluster {
				c := around().volume("a", "n1").pod("web-1", "n1", []string{"a"})
				c.o.CSIPluginNotReady = "the longhorn-csi-plugin pod on node n1 is not Ready"
				return c
			}(),
			waits: []string{"CSIPluginNotReady n1"},
		},
		{
			name: "a Longhorn DaemonSet rolling out: nothing moves yet",
			c: func() *cluster {
				c := around().volume("a", "n1").pod("web-1", "n1", []string{"a"})
				c.o.RolloutPending = "DaemonSet longhorn-manager: 2 of 3 pods updated"
				return c
			}(),
			waits: []string{"LonghornRolloutPending n1"},
		},
		{
			name: "with nothing to move, Longhorn's own state does not matter",
			c: func() *cluster {
				c := around()
				c.o.CSIPluginNotReady, c.o.RolloutPending = "not ready", "rolling"
				return c
			}(),
			done: true,
		},
		{
			name: "frontends left in the instance manager",
			c: func() *cluster {
				c := around()
				c.frontends = 1
				return c
			}(),
			waits: []string{"FrontendsOnNode n1"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := Decide(tc.c.o, tc.c.frontends)
			assert.Equal(t, tc.evict, m.Evict, "evictions")
			assert.Equal(t, tc.later, m.Deferred, "evictions left for later rounds")
			assert.Equal(t, tc.restart, m.Restart, "restarts")
			assert.Equal(t, tc.pins, reasons(m.Pins), "pins")
			assert.Equal(t, tc.waits, reasons(m.Waits), "waits")
			assert.Equal(t, tc.done, m.Done, "done")
			for _, s := range append(m.Pins, m.Waits...) {
				assert.NotEmpty(t, s.Message)
			}
		})
	}
}
