package longhorn

// This file (and mapping_volume.go, for volumes and their parts) maps
// Longhorn's objects (types.go) onto dataplane's types: the adapter's only
// reading of Longhorn's states.

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/switchback-dev/switchback/dataplane"
)

// SnapshotObjectName is the name of the Snapshot object for a snapshot named
// name of volume. Snapshot objects share one namespace while the upgrade
// names its snapshots per manager and node (the same name for every
// volume), so the volume goes into the object name; a long result is cut
// and made unique with a hash so it stays a valid name (at most 63
// characters, like Longhorn's own snapshot names).
func SnapshotObjectName(volume, name string) string {
	full := name + "-" + volume
	if len(full) <= 63 {
		return full
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(full)) // hash writes never fail
	sum := fmt.Sprintf("%08x", h.Sum32())
	return strings.TrimRight(full[:63-len(sum)-1], "-.") + "-" + sum
}

func conditionTrue(conds []Condition, typ string) bool {
	for _, c := range conds {
		if c.Type == typ {
			return c.Status == "True"
		}
	}
	return false
}

// toNode maps a Longhorn node and its Kubernetes node. Ready needs both to
// say Ready: Longhorn's condition covers its own manager pod, the
// Kubernetes one the kubelet. A missing Kubernetes node is NotReady. The
// node runs the v2 engine when it has a v2 instance manager and is not
// labelled to disable it.
func toNode(ln *LonghornNode, kn *KubeNode, hasV2IM bool, managers []*Pod) dataplane.Node {
	n := dataplane.Node{
		Name:            ln.Name,
		Ready:           conditionTrue(ln.Status.Conditions, ConditionReady),
		V2:              hasV2IM,
		AllowScheduling: ln.Spec.AllowScheduling,
		ManagerIMImage:  managerIMImage(managers),
		NVMeMultipath:   dataplane.ParseMultipath(ln.Annotations[MultipathAnnotation]),
		Zone:            ln.Status.Zone,
		Tags:            slices.Clone(ln.Spec.Tags),
	}
	if kn == nil {
		n.Ready = false
		return n
	}
	n.Ready = n.Ready && conditionTrue(kn.Status.Conditions, ConditionReady)
	n.Cordoned = kn.Spec.Unschedulable
	n.WorkloadTainted = slices.ContainsFunc(kn.Spec.Taints, isWorkloadTaint)
	if i := slices.IndexFunc(kn.Spec.Taints, isPendingTaint); i >= 0 {
		n.UpgradePendingMark = kn.Spec.Taints[i].Value
	}
	if kn.Labels[DisableV2Label] == "true" {
		n.V2 = false
	}
	for _, img := range kn.Status.Images {
		for _, name := range img.Names {
			n.Images = append(n.Images, imageAliases(name)...)
		}
	}
	slices.Sort(n.Images)
	n.Images = slices.Compact(n.Images)
	return n
}

// managerIMImage is the --instance-manager-image of the manager
// pods on a node ("" when none runs, or its command line names none);
// while a rollout replaces it, the newest pod's.
func managerIMImage(pods []*Pod) string {
	var newest *Pod
	for _, p := range pods {
		if p.DeletionTimestamp == nil && (newest == nil || p.CreationTimestamp.After(newest.CreationTimestamp.Time)) {
			newest = p
		}
	}
	if newest == nil {
		return ""
	}
	for _, c := range newest.Spec.Containers {
		if c.Name != ManagerContainer {
			continue
		}
		line := append(slices.Clone(c.Command), c.Args...)
		for i, a := range line {
			if v, ok := strings.CutPrefix(a, ManagerIMImageFlag+"="); ok {
				return v
			}
			if a == ManagerIMImageFlag && i+1 < len(line) {
				return line[i+1]
			}
		}
	}
	return ""
}

// imageAliases returns name and the shorter forms the Longhorn setting may
// use for it: the kubelet reports Docker Hub images fully qualified
// ("docker.io/longhornio/x:v1"), the setting usually does not
// ("longhornio/x:v1").
func imageAliases(name string) []string {
	out := []string{name}
	for _, prefix := range []string{"docker.io/", "index.docker.io/"} {
		if rest, ok := strings.CutPrefix(name, prefix); ok {
			out = append(out, rest)
			if short, ok := strings.CutPrefix(rest, "library/"); ok {
				out = append(out, short)
			}
		}
	}
	return out
}

// isV2 reports whether a data-engine field names the v2 engine; empty is v1,
// Longhorn's default.
func isV2(dataEngine string) bool { return dataEngine == dataplane.DataEngineV2 }

// dataEngineOf returns the engine a volume uses, "" read as v1.
func dataEngineOf(v *Volume) string {
	if v.Spec.DataEngine == "" {
		return DataEngineV1
	}
	return v.Spec.DataEngine
}

// imState maps an instance manager's state. An IM being deleted is stopped
// whatever it last reported: the node step must not delete it again, and a
// target must not be moved onto it. "unknown" (Longhorn lost contact),
// "upgrading" (an in-place image update), and an IM with no state yet are
// starting: not running, and not failed either, since only a sustained
// error may fail a node upgrade. A state this adapter does not know is also
// taken as starting, which stalls the step visibly rather than failing it.
func imState(im *InstanceManager) dataplane.IMState {
	if im.DeletionTimestamp != nil {
		return dataplane.IMStopped
	}
	switch im.Status.CurrentState {
	case StateRunning:
		return dataplane.IMRunning
	case StateStopped:
		return dataplane.IMStopped
	case StateError:
		return dataplane.IMError
	default: // starting, unknown, upgrading, "", anything new
		return dataplane.IMStarting
	}
}

// liveInstances counts the instances of a status map that run or are
// starting: what Longhorn's node controller checks before it removes an
// old-image IM.
func liveInstances(m map[string]InstanceProcess) int {
	n := 0
	for _, p := range m {
		if p.Status.State == StateRunning || p.Status.State == StateStarting {
			n++
		}
	}
	return n
}

func toInstanceManager(im *InstanceManager) dataplane.InstanceManager {
	out := dataplane.InstanceManager{
		Name:       im.Name,
		Node:       im.Spec.NodeID,
		Image:      im.Spec.Image,
		DataEngine: im.Spec.DataEngine,
		State:      imState(im),
		Deleting:   im.DeletionTimestamp != nil,
	}
	// Longhorn clears the maps of an IM that is not running, and leaves
	// those of one being deleted as they were (it writes no status then):
	// it runs nothing worth counting.
	if im.DeletionTimestamp == nil {
		out.Engines = liveInstances(im.Status.InstanceEngines)
		out.Frontends = liveInstances(im.Status.InstanceEngineFrontends)
		out.Replicas = liveInstances(im.Status.InstanceReplicas)
		out.Shards = liveInstances(im.Status.InstanceShards) + liveInstances(im.Status.InstanceShardGroups)
	}
	return out
}

// toIMUpgrade maps one of Longhorn's per-node instance-manager upgrades:
// its node and its phase as written. One being deleted keeps its phase:
// its controller may still be moving engines back, and the rule that reads
// it (precheck.OtherUpgrader) fails closed on anything not over.
func toIMUpgrade(u *InstanceManagerUpgrade) dataplane.IMUpgrade {
	return dataplane.IMUpgrade{Name: u.Name, Node: u.Spec.NodeID, State: u.Status.State}
}

// toUpgradeControl maps Longhorn's upgrade control: the node its cycle is
// on and the state of each node (nil when it lists none).
func toUpgradeControl(c *InstanceManagerUpgradeControl) dataplane.UpgradeControl {
	out := dataplane.UpgradeControl{Name: c.Name, CurrentNode: c.Status.CurrentNode}
	if len(c.Status.Nodes) > 0 {
		out.Nodes = make(map[string]string, len(c.Status.Nodes))
		for node, st := range c.Status.Nodes {
			out.Nodes[node] = st.State
		}
	}
	return out
}

// toUpgrader maps what Longhorn's own upgrader shows: the automatic-upgrade
// settings found (raw values, by name), its upgrade controls and its
// per-node upgrades, each sorted by name so that two reads of the same
// objects agree (caches and lists come in no particular order). Nothing
// found is the zero value, as on a Longhorn without that upgrader.
func toUpgrader(settings []*Setting, controls []*InstanceManagerUpgradeControl, upgrades []*InstanceManagerUpgrade) dataplane.LonghornUpgrader {
	var out dataplane.LonghornUpgrader
	for _, s := range settings {
		if out.Settings == nil {
			out.Settings = make(map[string]string, len(settings))
		}
		out.Settings[s.Name] = s.Value
	}
	controls = slices.Clone(controls)
	slices.SortFunc(controls, func(a, b *InstanceManagerUpgradeControl) int { return strings.Compare(a.Name, b.Name) })
	for _, c := range controls {
		out.Controls = append(out.Controls, toUpgradeControl(c))
	}
	upgrades = slices.Clone(upgrades)
	slices.SortFunc(upgrades, func(a, b *InstanceManagerUpgrade) int { return strings.Compare(a.Name, b.Name) })
	for _, u := range upgrades {
		out.Upgrades = append(out.Upgrades, toIMUpgrade(u))
	}
	return out
}
