package workloadmove

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/switchback-dev/switchback/dataplane"
)

// Move is what to do next to empty a node of initiators.
type Move struct {
	// Evict are the pods to evict now, in name order.
	Evict []Eviction
	// Deferred are the pods to evict in later rounds: their budget allows
	// no more disruptions this round than Evict takes.
	Deferred []Eviction
	// Restart are the share-manager pods to delete now, in name order:
	// Longhorn recreates each elsewhere and its volume follows it.
	Restart []Restart
	// Pins are what keeps the node from being emptied without a person;
	// with any, Evict and Restart are empty (as while Longhorn's CSI plugin
	// there is not Ready or a Longhorn DaemonSet rolls out, see Waits).
	Pins []Stall
	// Waits are what is under way or ends by itself.
	Waits []Stall
	// Done reports that nothing holds an initiator on the node: no v2
	// volume is attached to it or has a ticket for it, and its instance
	// managers list no engine frontend.
	Done bool
}

// Eviction is one pod to evict and what it holds on the node.
type Eviction struct {
	Pod dataplane.ObjectRef
	UID string
	// Volumes are the v2 volumes attached to the node that it uses.
	Volumes []string
	// Budgets are the PodDisruptionBudgets that decide whether it may go.
	Budgets []string
}

// Restart is one share-manager pod to delete and its volume.
type Restart struct {
	Pod    dataplane.ObjectRef
	UID    string
	Volume string
}

// Stall is one thing a node waits for, or is pinned by.
type Stall struct {
	Reason string
	// Object is the pod (namespace/name) or volume it is about.
	Object  string
	Message string
}

// Decide is the next move to empty w.Node of initiators, frontends being
// the engine frontends its instance managers list.
func Decide(w dataplane.Workloads, frontends int) Move {
	d := newDecision(w)
	held := d.held()
	for _, v := range held {
		d.volume(v)
	}
	// What Longhorn needs on the node first holds every move, and ends by
	// itself.
	holds := false
	if len(held) > 0 && w.CSIPluginNotReady != "" {
		d.wait(WaitCSIPlugin, w.Node, "%s: a pod evicted now could not have its volumes unmounted", w.CSIPluginNotReady)
		holds = true
	}
	if len(held) > 0 && w.RolloutPending != "" {
		d.wait(WaitLonghornRollout, w.Node, "%s: the taint that keeps pods off node %s would keep its new pod off it too", w.RolloutPending, w.Node)
		holds = true
	}
	var m Move
	m.Pins = sortStalls(d.pins)
	m.Waits = sortStalls(d.waits)
	if len(m.Pins) == 0 && !holds {
		m.Evict, m.Deferred = d.evictions()
		m.Restart = slices.SortedFunc(maps.Values(d.restarts), func(a, b Restart) int { return cmp.Compare(a.Pod.String(), b.Pod.String()) })
	}
	m.Done = len(held) == 0 && frontends == 0
	if len(held) == 0 && frontends > 0 {
		m.Waits = append(m.Waits, Stall{WaitFrontends, w.Node, fmt.Sprintf(
			"no v2 volume is attached to node %s any more, but its instance manager still lists %d engine frontend(s)", w.Node, frontends)})
	}
	return m
}

// decision is Decide's working state.
type decision struct {
	o       dataplane.Workloads
	volumes map[string]dataplane.Volume
	// users are, per volume, the pods bound to the node whose claims name it.
	users map[string][]dataplane.Pod
	// tickets are, per volume, its tickets for the node.
	tickets  map[string][]dataplane.Ticket
	pins     []Stall
	waits    []Stall
	evict    map[string]*Eviction
	restarts map[string]Restart
}

func newDecision(o dataplane.Workloads) *decision {
	d := &decision{o: o, volumes: map[string]dataplane.Volume{}, users: map[string][]dataplane.Pod{}, tickets: map[string][]dataplane.Ticket{},
		evict: map[string]*Eviction{}, restarts: map[string]Restart{}}
	claims := map[dataplane.ObjectRef]string{}
	for _, c := range o.Claims {
		claims[c.ObjectRef] = c.Volume
	}
	for _, p := range o.Pods {
		if p.Node != o.Node {
			continue
		}
		seen := map[string]bool{}
		for _, c := range p.Claims {
			if v, ok := claims[dataplane.ObjectRef{Namespace: p.Namespace, Name: c}]; ok && !seen[v] {
				seen[v] = true
				d.users[v] = append(d.users[v], p)
			}
		}
	}
	for _, v := range o.Volumes {
		d.volumes[v.Name] = v
		for _, t := range v.Tickets {
			// An RWX volume's csi-attacher tickets are its NFS clients':
			// Longhorn attaches it where its share-manager ticket says, and
			// a client holds no initiator (isCSIAttacherTicketOfRegularRWXVolume,
			// LM@v1.12.1 controller/volume_attachment_controller.go:638-645).
			if t.Node == o.Node && !(v.ShareManager && t.Type == dataplane.AttacherCSI) {
				d.tickets[v.Name] = append(d.tickets[v.Name], t)
			}
		}
	}
	return d
}

// held are the v2 volumes that hold, or are about to hold, an initiator on
// the node: attached to it, or with a ticket asking for it; in name order.
func (d *decision) held() []dataplane.Volume {
	var out []dataplane.Volume
	for _, v := range d.volumes {
		if v.DataEngine == dataplane.DataEngineV2 && (v.AttachedNode == d.o.Node || len(d.tickets[v.Name]) > 0) {
			out = append(out, v)
		}
	}
	slices.SortFunc(out, func(a, b dataplane.Volume) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// volume decides what moves v off the node, or what keeps it there.
func (d *decision) volume(v dataplane.Volume) {
	node := d.o.Node
	switch {
	case v.StrictLocal:
		d.pin(PinStrictLocalVolume, v.Name, "volume %s is strict-local: its only replica lives on node %s, so it cannot be attached anywhere else; "+
			"detach it (stop its workload) for the upgrade, or change its data locality", v.Name, node)
		return
	case v.Migratable:
		d.pin(PinMigratableVolume, v.Name, "volume %s is migratable: Longhorn moves it by live migration, which Switchback does not drive; "+
			"migrate its workload off node %s", v.Name, node)
		return
	}
	workload := false
	for _, t := range d.tickets[v.Name] {
		switch t.Type {
		case dataplane.AttacherLonghornAPI:
			d.pin(PinManualAttachment, v.Name, "volume %s is attached to node %s through Longhorn's API or UI (ticket %s): detach it there; "+
				"Switchback moves only what Kubernetes workloads attached", v.Name, node, t.ID)
		case dataplane.AttacherCSI, dataplane.AttacherShareManager:
			workload = true
		default:
			d.wait(WaitLonghornTicket, v.Name, "Longhorn's %s holds volume %s on node %s (ticket %s) until its work is done", t.Type, v.Name, node, t.ID)
		}
	}
	if v.AttachedNode == node && len(d.tickets[v.Name]) == 0 {
		workload = true // a ticket already gone, the detach under way
	}
	if !workload {
		return
	}
	if v.ShareManager {
		d.shareManager(v)
		return
	}
	for _, p := range d.users[v.Name] {
		d.pod(p, v)
	}
	if len(d.users[v.Name]) == 0 {
		d.wait(WaitDetach, v.Name, "no pod on node %s uses volume %s any more; it is being detached", node, v.Name)
	}
}

// shareManager restarts the NFS server of an RWX volume attached to the
// node, elsewhere.
func (d *decision) shareManager(v dataplane.Volume) {
	for _, p := range d.o.Pods {
		if p.ShareManagerOf != v.Name || p.Node != d.o.Node {
			continue
		}
		if p.Deleting {
			d.wait(WaitPodTerminating, p.String(), "share-manager pod %s of volume %s is being deleted; Longhorn starts it again elsewhere", p, v.Name)
			return
		}
		if p.ToleratesTaint {
			// Longhorn gives it the tolerations of its taint-toleration
			// setting: one tolerating every taint would start again here.
			d.pin(PinPodToleratesTaint, p.String(), "share-manager pod %s of volume %s tolerates the taint that keeps pods off node %s "+
				"(Longhorn's taint-toleration setting), so it would start again there: move it by hand", p, v.Name, d.o.Node)
			return
		}
		d.restarts[p.String()] = Restart{Pod: p.ObjectRef, UID: p.UID, Volume: v.Name}
		return
	}
	d.wait(WaitDetach, v.Name, "volume %s follows its share-manager pod off node %s", v.Name, d.o.Node)
}

// pod decides about one pod using v: evict it, wait for it, or pin the
// node.
func (d *decision) pod(p dataplane.Pod, v dataplane.Volume) {
	node := d.o.Node
	switch {
	case p.Terminal || p.Deleting:
		d.wait(WaitPodTerminating, p.String(), "pod %s, which uses volume %s, is ending; the volume is detached from node %s once it has", p, v.Name, node)
	case p.Mirror:
		d.pin(PinStaticPod, p.String(), "pod %s uses volume %s and is a static pod the kubelet of node %s runs from a file: move it by hand", p, v.Name, node)
	case p.Controller == "DaemonSet":
		d.pin(PinDaemonSetPod, p.String(), "pod %s uses volume %s and belongs to a DaemonSet, which runs it on node %s whatever happens: "+
			"stop it there for the upgrade", p, v.Name, node)
	case p.Controller == "":
		d.pin(PinPodWithoutController, p.String(), "pod %s uses volume %s and nothing would recreate it: evicting it would end its workload, "+
			"not move it; move it by hand", p, v.Name)
	case p.PinnedBy != "":
		d.pin(PinPodPinnedToNode, p.String(), "pod %s uses volume %s and only node %s may run it (%s): move it by hand", p, v.Name, node, p.PinnedBy)
	case p.ToleratesTaint:
		d.pin(PinPodToleratesTaint, p.String(), "pod %s uses volume %s and tolerates the taint that keeps pods off node %s, so it could be "+
			"scheduled straight back: move it by hand", p, v.Name, node)
	case len(p.Budgets) > 1:
		d.pin(PinSeveralBudgets, p.String(), "pod %s uses volume %s and is selected by the PodDisruptionBudgets %s: the eviction API refuses "+
			"to evict a pod more than one budget selects; make one budget select it", p, v.Name, strings.Join(p.Budgets, ", "))
	default:
		e := d.evict[p.String()]
		if e == nil {
			e = &Eviction{Pod: p.ObjectRef, UID: p.UID, Budgets: slices.Clone(p.Budgets)}
			d.evict[p.String()] = e
		}
		e.Volumes = append(e.Volumes, v.Name)
	}
}

// evictions are the pods to evict this round, in name order, and those
// left for later rounds: at most as many of a budget's pods as it allows
// disruptions now, and one when it allows none (the eviction API's answer
// then says why it waits), so a round does not ask the API for what it
// would refuse anyway.
func (d *decision) evictions() (now, later []Eviction) {
	all := slices.SortedFunc(maps.Values(d.evict), func(a, b *Eviction) int { return cmp.Compare(a.Pod.String(), b.Pod.String()) })
	used := map[string]int32{}
	for _, e := range all {
		if len(e.Budgets) == 1 {
			b := e.Budgets[0]
			allowed := max(d.o.Budgets[b].DisruptionsAllowed, 1)
			if used[b] >= allowed {
				later = append(later, *e)
				continue
			}
			used[b]++
		}
		now = append(now, *e)
	}
	return now, later
}

func (d *decision) pin(reason, object, format string, args ...any) {
	d.pins = append(d.pins, Stall{reason, object, fmt.Sprintf(format, args...)})
}

func (d *decision) wait(reason, object, format string, args ...any) {
	d.waits = append(d.waits, Stall{reason, object, fmt.Sprintf(format, args...)})
}

// sortStalls orders stalls by object, then reason, and drops repeats (a pod
// using two volumes pins the node once).
func sortStalls(s []Stall) []Stall {
	slices.SortFunc(s, func(a, b Stall) int {
		return cmp.Or(cmp.Compare(a.Object, b.Object), cmp.Compare(a.Reason, b.Reason), cmp.Compare(a.Message, b.Message))
	})
	return slices.CompactFunc(s, func(a, b Stall) bool { return a.Object == b.Object && a.Reason == b.Reason })
}
