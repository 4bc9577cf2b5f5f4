package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/switchback-dev/switchback/dataplane"
)

// PodSpec describes a workload pod for AddPod: a pod bound to Node that
// uses Claims, each a claim named after, and bound to, the volume of that
// name.
type PodSpec struct {
	// Namespace is "default" when empty.
	Namespace, Name string
	Node            string
	// Controller is the kind of its controlling owner: "ReplicaSet" when
	// empty, "StatefulSet" (its pod comes back under the same name),
	// "DaemonSet", or "None" for a pod nothing recreates.
	Controller string
	Claims     []string
	// ToleratesTaint and PinnedBy are dataplane.Pod's.
	ToleratesTaint bool
	PinnedBy       string
}

// ControllerNone is PodSpec.Controller of a pod nothing recreates.
const ControllerNone = "None"

// ErrNoNodeForPod refuses a pod placed where no node could run it.
var ErrNoNodeForPod = errors.New("no node can run the pod")

// pod is one simulated workload pod.
type pod struct {
	spec PodSpec
	uid  string
	// base is the name its controller's pods are named after: the
	// workload's, across its pods.
	base string
}

func (p *pod) key() string { return p.spec.Namespace + "/" + p.spec.Name }

// AddPod adds a running workload pod, attaching its claims' volumes to its
// node as a kubelet would.
func (s *Sim) AddPod(spec PodSpec) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if spec.Namespace == "" {
		spec.Namespace = "default"
	}
	if spec.Controller == "" {
		spec.Controller = "ReplicaSet"
	}
	if spec.Name == "" {
		return errors.New("add pod: a name is required")
	}
	if _, err := s.node(spec.Node); err != nil {
		return fmt.Errorf("add pod %s/%s: %w", spec.Namespace, spec.Name, err)
	}
	for _, c := range spec.Claims {
		v, err := s.volume(c)
		if err != nil {
			return fmt.Errorf("add pod %s/%s: claim %s: %w", spec.Namespace, spec.Name, c, err)
		}
		if v.attached != "" && v.attached != spec.Node && !v.shareManager {
			return fmt.Errorf("add pod %s/%s on %s: volume %s is attached to %s: %w", spec.Namespace, spec.Name, spec.Node, c, v.attached, ErrVolumeAttached)
		}
	}
	p := &pod{spec: spec, base: spec.Name}
	if _, dup := s.pods[p.key()]; dup {
		return fmt.Errorf("add pod %s: already exists", p.key())
	}
	s.podSeq++
	p.uid = fmt.Sprintf("pod-uid-%d", s.podSeq)
	now := s.now()
	for _, c := range spec.Claims {
		if err := s.attachFor(s.vols[c], spec.Node, now); err != nil {
			return fmt.Errorf("add pod %s: %w", p.key(), err)
		}
	}
	s.pods[p.key()] = p
	s.checkIO()
	s.changes.Notify()
	return nil
}

// DeletePod removes a workload pod for good, as an operator deleting its
// workload would: its volumes are detached from its node (an RWX volume
// stays with its share-manager). A pod that is not there is an error.
func (s *Sim) DeletePod(key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pods[key]
	if p == nil {
		return fmt.Errorf("delete pod %s: %w", key, dataplane.ErrNotFound)
	}
	delete(s.pods, key)
	for _, c := range p.spec.Claims {
		if v := s.vols[c]; v != nil && v.attached == p.spec.Node && !v.shareManager {
			s.detach(v)
		}
	}
	s.checkIO()
	s.react()
	s.changes.Notify()
	return nil
}

// AddPods gives every attached volume without a pod a ReplicaSet's pod of
// its own on the volume's node, named after the volume: the workloads of a
// generated cluster.
func (s *Sim) AddPods() error {
	s.mu.Lock()
	used := map[string]bool{}
	for _, p := range s.pods {
		for _, c := range p.spec.Claims {
			used[c] = true
		}
	}
	var specs []PodSpec
	for _, name := range s.sortedVolumeNames() {
		if v := s.vols[name]; v.attached != "" && !used[name] {
			specs = append(specs, PodSpec{Namespace: "app", Name: name + "-0", Node: v.attached, Claims: []string{name}})
		}
	}
	s.mu.Unlock()
	for _, spec := range specs {
		if err := s.AddPod(spec); err != nil {
			return err
		}
	}
	return nil
}

// Restarts counts, per workload (namespace/name of its first pod), the
// times one of its pods was evicted.
func (s *Sim) Restarts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.restarts)
}

// Pods lists the workload pods, by namespace/name.
func (s *Sim) Pods() []dataplane.Pod {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]dataplane.Pod, 0, len(s.pods))
	for _, k := range slices.Sorted(maps.Keys(s.pods)) {
		out = append(out, s.pods[k].export())
	}
	return out
}

func (p *pod) export() dataplane.Pod {
	out := dataplane.Pod{
		ObjectRef:      dataplane.ObjectRef{Namespace: p.spec.Namespace, Name: p.spec.Name},
		UID:            p.uid,
		Node:           p.spec.Node,
		Ready:          p.spec.Node != "",
		Controller:     p.spec.Controller,
		Claims:         slices.Clone(p.spec.Claims),
		ToleratesTaint: p.spec.ToleratesTaint,
		PinnedBy:       p.spec.PinnedBy,
	}
	if out.Controller == ControllerNone {
		out.Controller = ""
	}
	return out
}

// Workloads implements dataplane.Reader: the pods on the node, their
// claims and volumes, and the volumes attached to the node, each attached
// volume with the ticket of what attached it (its pod's CSI attacher; for
// an RWX volume its share-manager's, with its clients' CSI tickets, and
// its share-manager pod where it runs). The simulated cluster has no
// disruption budgets.
func (s *Sim) Workloads(ctx context.Context, nodeName string) (dataplane.Workloads, error) {
	if err := ctx.Err(); err != nil {
		return dataplane.Workloads{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick()
	w := dataplane.Workloads{Node: nodeName, Budgets: map[string]dataplane.Budget{}}
	vols := map[string]bool{}
	for name := range s.attachedOn[nodeName] {
		vols[name] = true
	}
	for _, k := range slices.Sorted(maps.Keys(s.pods)) {
		p := s.pods[k]
		if p.spec.Node != nodeName {
			continue
		}
		w.Pods = append(w.Pods, p.export())
		for _, c := range p.spec.Claims {
			w.Claims = append(w.Claims, dataplane.Claim{ObjectRef: dataplane.ObjectRef{Namespace: p.spec.Namespace, Name: c}, Volume: c})
			vols[c] = true
		}
	}
	slices.SortFunc(w.Claims, func(a, b dataplane.Claim) int { return cmp.Compare(a.String(), b.String()) })
	w.Claims = slices.Compact(w.Claims)
	for _, name := range slices.Sorted(maps.Keys(vols)) {
		v := s.vols[name]
		if v == nil {
			continue
		}
		out := s.exportVolume(v)
		switch {
		case v.shareManager && v.attached != "":
			// Longhorn's tickets for an RWX volume: its share-manager's,
			// which it is attached by, and its NFS clients' (Longhorn's
			// VolumeAttachment controller ignores those).
			out.Tickets = []dataplane.Ticket{{ID: dataplane.AttacherShareManager + "-" + name, Type: dataplane.AttacherShareManager, Node: v.attached}}
			for _, n := range s.clientNodes(name) {
				out.Tickets = append(out.Tickets, dataplane.Ticket{ID: "csi-" + name + "-" + n, Type: dataplane.AttacherCSI, Node: n})
			}
			if v.attached == nodeName {
				w.Pods = append(w.Pods, shareManagerPod(v))
			}
		case v.attached != "":
			out.Tickets = []dataplane.Ticket{{ID: "csi-" + name, Type: dataplane.AttacherCSI, Node: v.attached}}
		}
		w.Volumes = append(w.Volumes, out)
	}
	return w, nil
}

// TaintNode implements dataplane.Actions.
func (s *Sim) TaintNode(ctx context.Context, nodeName string) error {
	return s.setTainted(ctx, "TaintNode", nodeName, true)
}

// UntaintNode implements dataplane.Actions.
func (s *Sim) UntaintNode(ctx context.Context, nodeName string) error {
	return s.setTainted(ctx, "UntaintNode", nodeName, false)
}

func (s *Sim) setTainted(ctx context.Context, action, nodeName string, tainted bool) error {
	return s.act(ctx, action, nodeName, "", func(time.Time) (bool, error) {
		n, err := s.node(nodeName)
		if err != nil {
			return false, fmt.Errorf("%s: %w", action, err)
		}
		if n.tainted == tainted {
			return false, nil
		}
		n.tainted = tainted
		return true, nil
	})
}

// MarkUpgradePending implements dataplane.NodeMarker.
func (s *Sim) MarkUpgradePending(ctx context.Context, nodeName, mark string) error {
	return s.act(ctx, "MarkUpgradePending", nodeName, mark, func(time.Time) (bool, error) {
		n, err := s.node(nodeName)
		if err != nil {
			return false, fmt.Errorf("MarkUpgradePending: %w", err)
		}
		if n.pending == mark {
			return false, nil
		}
		n.pending = mark
		return true, nil
	})
}

// EvictPod implements dataplane.Actions as the eviction API and the pod's
// controller would: the pod goes, its volumes are detached from its node,
// and its controller's new pod is scheduled on another node (see placePod)
// and its volumes attached there. A pod nothing recreates is gone for
// good.
func (s *Sim) EvictPod(ctx context.Context, key, uid string) error {
	return s.act(ctx, "EvictPod", key, uid, func(now time.Time) (bool, error) {
		p := s.pods[key]
		if p == nil || p.uid != uid {
			return false, nil
		}
		delete(s.pods, key)
		s.restarts[p.spec.Namespace+"/"+p.base]++
		for _, c := range p.spec.Claims {
			// An RWX volume stays with its share-manager.
			if v := s.vols[c]; v != nil && v.attached == p.spec.Node && !v.shareManager {
				s.detach(v)
			}
		}
		if p.spec.Controller == ControllerNone {
			return true, nil
		}
		next := &pod{spec: p.spec, base: p.base}
		s.podSeq++
		next.uid = fmt.Sprintf("pod-uid-%d", s.podSeq)
		if p.spec.Controller != "StatefulSet" {
			next.spec.Name = fmt.Sprintf("%s-%d", strings.TrimSuffix(p.base, "-0"), s.podSeq)
		}
		next.spec.Claims = slices.Clone(p.spec.Claims)
		next.spec.Node = s.placePod(next, p.spec.Node)
		s.pods[next.key()] = next
		if next.spec.Node == "" {
			return true, nil // Pending: no node can run it now
		}
		for _, c := range next.spec.Claims {
			if v := s.vols[c]; v != nil {
				if err := s.attachFor(v, next.spec.Node, now); err != nil {
					return true, fmt.Errorf("evict pod %s: attach its volume on %s: %w", key, next.spec.Node, err)
				}
			}
		}
		return true, nil
	})
}

// placePod picks the node the scheduler would give p, leaving from: Ready,
// uncordoned, without the move's taint unless p tolerates it, with a
// running v2 instance manager (its volumes attach there); then, as the
// scheduler's TaintToleration score ranks a node with a PreferNoSchedule
// taint the pod does not tolerate below one without, an unmarked node
// first (kube-scheduler pkg/scheduler/framework/plugins/tainttoleration:
// Score counts the intolerable PreferNoSchedule taints); then, as it
// spreads pods, the least busy, then by name. It knows nothing of the
// upgrade but those taints. "" when none.
func (s *Sim) placePod(p *pod, from string) string {
	busy := map[string]int{}
	for _, q := range s.pods {
		busy[q.spec.Node]++
	}
	var best *node
	better := func(n *node) bool {
		if best == nil {
			return true
		}
		if avoid := func(m *node) bool { return m.pending != "" && !p.spec.ToleratesTaint }; avoid(n) != avoid(best) {
			return !avoid(n)
		}
		if busy[n.name] != busy[best.name] {
			return busy[n.name] < busy[best.name]
		}
		return n.name < best.name
	}
	for _, name := range s.nodeNames {
		n := s.nodes[name]
		if name == from || !n.ready || n.cordoned || (n.tainted && !p.spec.ToleratesTaint) || !n.v2 || !n.imRunning() {
			continue
		}
		if better(n) {
			best = n
		}
	}
	if best == nil {
		return ""
	}
	return best.name
}

// attachFor attaches v to node for a pod starting there; an RWX volume is
// attached once, where its share-manager starts (beside its first client),
// and serves every other client over NFS.
func (s *Sim) attachFor(v *volume, node string, now time.Time) error {
	if v.shareManager {
		if v.attached != "" {
			return nil
		}
		s.podSeq++
		v.smUID = fmt.Sprintf("pod-uid-%d", s.podSeq)
	}
	_, err := s.attach(v, node, now)
	return err
}

// clientNodes are the nodes of the pods using volume, in name order.
func (s *Sim) clientNodes(volume string) []string {
	var out []string
	for _, p := range s.pods {
		if p.spec.Node != "" && slices.Contains(p.spec.Claims, volume) {
			out = append(out, p.spec.Node)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// ShareManagerNamespace is the namespace of the simulated share-manager
// pods, Longhorn's.
const ShareManagerNamespace = "longhorn-system"

// shareManagerPrefix names a volume's share-manager pod, as Longhorn does.
const shareManagerPrefix = "share-manager-"

// shareManagerPod is the share-manager pod of an attached RWX volume.
func shareManagerPod(v *volume) dataplane.Pod {
	return dataplane.Pod{ObjectRef: dataplane.ObjectRef{Namespace: ShareManagerNamespace, Name: shareManagerPrefix + v.name},
		UID: v.smUID, Node: v.attached, Ready: true, Controller: "ShareManager", ShareManagerOf: v.name}
}

// RestartShareManager implements dataplane.Actions as Longhorn's
// share-manager controller and the scheduler would: the pod of that uid
// goes, the volume detaches, and a new pod (a new uid) is placed like any
// other (placePod) and the volume attached there. A pod of another uid (one
// started again already) is a no-op.
func (s *Sim) RestartShareManager(ctx context.Context, key, uid string) error {
	return s.act(ctx, "RestartShareManager", key, uid, func(now time.Time) (bool, error) {
		name, ok := strings.CutPrefix(key, ShareManagerNamespace+"/"+shareManagerPrefix)
		v := s.vols[name]
		if !ok || v == nil || !v.shareManager || v.attached == "" || v.smUID != uid {
			return false, nil
		}
		from := v.attached
		s.detach(v)
		s.restarts[key]++
		to := s.placePod(&pod{spec: PodSpec{Namespace: ShareManagerNamespace, Name: shareManagerPrefix + name}}, from)
		if to == "" {
			return true, nil // Pending: no node can run it now
		}
		return true, s.attachFor(v, to, now)
	})
}
