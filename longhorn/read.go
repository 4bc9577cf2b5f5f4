package longhorn

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/switchback-dev/switchback/dataplane"
)

// Nodes lists every Longhorn node, sorted by name. A Kubernetes node that
// Longhorn does not manage is not listed: nothing of it can be upgraded.
func (p *Plane) Nodes(ctx context.Context) ([]dataplane.Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	lns := list[LonghornNode](p.lhNodes)
	slices.SortFunc(lns, func(a, b *LonghornNode) int { return strings.Compare(a.Name, b.Name) })
	out := make([]dataplane.Node, 0, len(lns))
	for _, ln := range lns {
		out = append(out, p.node(ln))
	}
	return out, nil
}

// Node returns one node, or an error matching dataplane.ErrNotFound when
// Longhorn has no such node.
func (p *Plane) Node(ctx context.Context, name string) (dataplane.Node, error) {
	if err := ctx.Err(); err != nil {
		return dataplane.Node{}, err
	}
	ln, ok := get[LonghornNode](p.lhNodes, key(p.ns, name))
	if !ok {
		return dataplane.Node{}, notFound(fmt.Sprintf("longhorn node %q", name))
	}
	return p.node(ln), nil
}

func (p *Plane) node(ln *LonghornNode) dataplane.Node {
	kn, _ := get[KubeNode](p.kubeNodes, ln.Name)
	hasV2 := slices.ContainsFunc(indexed[InstanceManager](p.ims, byNode, ln.Name), func(im *InstanceManager) bool {
		return isV2(im.Spec.DataEngine)
	})
	return toNode(ln, kn, hasV2, indexed[Pod](p.managers, byNode, ln.Name))
}

// Disks implements dataplane.Reader: every Longhorn node's disks, from
// the informers' cache.
func (p *Plane) Disks(ctx context.Context) (map[string][]dataplane.Disk, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	overProvisioning := p.intSetting(SettingStorageOverProvisioningPercentage, DefaultStorageOverProvisioningPercentage)
	minimalAvailable := p.intSetting(SettingStorageMinimalAvailablePercentage, DefaultStorageMinimalAvailablePercentage)
	out := map[string][]dataplane.Disk{}
	for _, ln := range list[LonghornNode](p.lhNodes) {
		if d := toDisks(ln, overProvisioning, minimalAvailable); len(d) > 0 {
			out[ln.Name] = d
		}
	}
	return out, nil
}

// DefaultInstanceManagerImage returns the value of the setting
// default-instance-manager-image.
func (p *Plane) DefaultInstanceManagerImage(ctx context.Context) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	s, ok := get[Setting](p.settings, key(p.ns, SettingDefaultInstanceManagerImage))
	if !ok {
		return "", notFound(fmt.Sprintf("longhorn setting %q", SettingDefaultInstanceManagerImage))
	}
	if s.Value == "" {
		return "", fmt.Errorf("longhorn setting %q is empty", SettingDefaultInstanceManagerImage)
	}
	return s.Value, nil
}

// InstanceManagers lists the v2 instance managers of node, or of every node
// when node is "", sorted by node then age then name. An unknown node is an
// error matching dataplane.ErrNotFound.
func (p *Plane) InstanceManagers(ctx context.Context, node string) ([]dataplane.InstanceManager, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var ims []*InstanceManager
	if node == "" {
		ims = list[InstanceManager](p.ims)
	} else {
		if _, ok := get[LonghornNode](p.lhNodes, key(p.ns, node)); !ok {
			return nil, notFound(fmt.Sprintf("longhorn node %q", node))
		}
		ims = indexed[InstanceManager](p.ims, byNode, node)
	}
	slices.SortFunc(ims, func(a, b *InstanceManager) int {
		return cmp.Or(
			strings.Compare(a.Spec.NodeID, b.Spec.NodeID),
			a.CreationTimestamp.Compare(b.CreationTimestamp.Time),
			strings.Compare(a.Name, b.Name),
		)
	})
	out := make([]dataplane.InstanceManager, 0, len(ims))
	for _, im := range ims {
		if isV2(im.Spec.DataEngine) {
			out = append(out, toInstanceManager(im))
		}
	}
	return out, nil
}

// Volumes lists every volume, v1 and v2, sorted by name.
func (p *Plane) Volumes(ctx context.Context) ([]dataplane.Volume, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	vols := list[Volume](p.volumes)
	slices.SortFunc(vols, func(a, b *Volume) int { return strings.Compare(a.Name, b.Name) })
	out := make([]dataplane.Volume, 0, len(vols))
	for _, v := range vols {
		out = append(out, p.volume(v))
	}
	return out, nil
}

// Volume returns one volume or an error matching dataplane.ErrNotFound.
func (p *Plane) Volume(ctx context.Context, name string) (dataplane.Volume, error) {
	if err := ctx.Err(); err != nil {
		return dataplane.Volume{}, err
	}
	v, ok := get[Volume](p.volumes, key(p.ns, name))
	if !ok {
		return dataplane.Volume{}, notFound(fmt.Sprintf("longhorn volume %q", name))
	}
	return p.volume(v), nil
}

// VolumesOn lists the volumes attached to node, with their target on node
// or with a replica on node, sorted by name, from the caches' node indexes:
// its cost follows the node's volumes, not the cluster's.
func (p *Plane) VolumesOn(ctx context.Context, node string) ([]dataplane.Volume, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	names := map[string]struct{}{}
	for _, v := range indexed[Volume](p.volumes, byNode, node) {
		names[v.Name] = struct{}{}
	}
	for _, r := range indexed[Replica](p.replicas, byNode, node) {
		if r.DeletionTimestamp == nil && r.Spec.VolumeName != "" {
			names[r.Spec.VolumeName] = struct{}{}
		}
	}
	out := make([]dataplane.Volume, 0, len(names))
	for _, name := range slices.Sorted(maps.Keys(names)) {
		v, ok := get[Volume](p.volumes, key(p.ns, name))
		if !ok {
			continue // a replica whose volume is gone
		}
		dv := p.volume(v)
		// The index holds every node the volume names; keep the volumes the
		// node really concerns (e.g. not one whose stale currentNodeID
		// still names it after a detach).
		if dv.AttachedNode == node || dv.TargetNode == node ||
			slices.ContainsFunc(dv.Replicas, func(r dataplane.Replica) bool { return r.Node == node }) {
			out = append(out, dv)
		}
	}
	return out, nil
}

// TargetCounts implements dataplane.Reader from the volume cache's host
// index: no volume is converted.
func (p *Plane) TargetCounts(ctx context.Context) (map[string]int, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	idx := p.volumes.inf.GetIndexer()
	out := map[string]int{}
	for _, node := range idx.ListIndexFuncValues(byHost) {
		keys, err := idx.IndexKeys(byHost, node)
		if err != nil {
			return nil, fmt.Errorf("longhorn volumes by target host %q: %w", node, err)
		}
		if len(keys) > 0 {
			out[node] = len(keys)
		}
	}
	return out, nil
}

func (p *Plane) volume(v *Volume) dataplane.Volume {
	efs := indexed[EngineFrontend](p.frontends, byVolume, v.Name)
	var evs []*Event
	if v.Status.SwitchoverState != "" {
		for _, ef := range efs {
			evs = append(evs, indexed[Event](p.events, byObject, ef.Name)...)
		}
	}
	out := toVolume(v,
		indexed[Replica](p.replicas, byVolume, v.Name),
		indexed[Engine](p.engines, byVolume, v.Name),
		efs, evs, rebuildSettings{wait: p.replenishWait(), fastV2: p.fastReplicaRebuildV2(), integrityV2: p.snapshotIntegrityV2(),
			softAntiAffinity: p.boolSetting(SettingReplicaSoftAntiAffinity, false), zoneSoftAntiAffinity: p.boolSetting(SettingReplicaZoneSoftAntiAffinity, true)})
	if ln, ok := get[LonghornNode](p.lhNodes, key(p.ns, out.AttachedNode)); ok && out.Attached() {
		out.InitiatorMultipath = dataplane.ParseMultipath(ln.Annotations[MultipathAnnotation])
	}
	return out
}

// RebuildSettings implements dataplane.Reader, from the settings cache.
func (p *Plane) RebuildSettings(ctx context.Context) (dataplane.RebuildSettings, error) {
	return dataplane.RebuildSettings{ReplenishWait: p.replenishWait()}, ctx.Err()
}

// replenishWait is the setting replica-replenishment-wait-interval
// (seconds), its default when it is absent or unreadable.
func (p *Plane) replenishWait() time.Duration {
	s, ok := get[Setting](p.settings, key(p.ns, SettingReplicaReplenishmentWaitInterval))
	if !ok {
		return DefaultReplicaReplenishmentWaitInterval
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s.Value), 10, 64)
	if err != nil || n < 0 {
		return DefaultReplicaReplenishmentWaitInterval
	}
	return time.Duration(n) * time.Second
}

// fastReplicaRebuildV2 is the v2 value of fast-replica-rebuild-enabled as
// Longhorn reads it (GetSettingAsBoolByDataEngine, LM@v1.12.1
// datastore/longhorn.go:4586-4620): the default (true) when the setting is
// absent, false when its value is not a JSON object with a boolean v2
// entry, which Longhorn's scheduler counts as false too.
func (p *Plane) fastReplicaRebuildV2() bool {
	s, ok := get[Setting](p.settings, key(p.ns, SettingFastReplicaRebuildEnabled))
	return !ok || settingTrueForV2(s.Value)
}

// settingTrueForV2 reads a data-engine-specific boolean setting's value
// for v2 as Longhorn does (ParseDataEngineSpecificSetting): a JSON object
// of strconv.ParseBool strings by engine; anything else is false.
func settingTrueForV2(value string) bool {
	var byEngine map[string]string
	if err := json.Unmarshal([]byte(value), &byEngine); err != nil {
		return false
	}
	v2, err := strconv.ParseBool(byEngine[dataplane.DataEngineV2])
	return err == nil && v2
}

// LonghornUpgrader implements dataplane.Reader. The automatic-upgrade
// settings (dataplane.AutoUpgradeSettings) that exist come from the
// settings cache, with their raw value. The upgrade controls and per-node
// upgrades exist only where Longhorn serves their CRDs, which is what the
// in-place profile was detected from (detect.go): there they are listed
// live from the apiserver, elsewhere none are. They are read at each
// manager's admission and upgrade start, before each node and while an
// upgrade is held: too rarely to keep two more informers in every process,
// and a live list shows an upgrader that started a moment ago.
func (p *Plane) LonghornUpgrader(ctx context.Context) (dataplane.LonghornUpgrader, error) {
	if err := ctx.Err(); err != nil {
		return dataplane.LonghornUpgrader{}, err
	}
	var settings []*Setting
	for _, name := range dataplane.AutoUpgradeSettings {
		if s, ok := get[Setting](p.settings, key(p.ns, name)); ok {
			settings = append(settings, s)
		}
	}
	var (
		controls []*InstanceManagerUpgradeControl
		upgrades []*InstanceManagerUpgrade
	)
	if p.opts.Platform.Profile.InPlaceIM() {
		var err error
		if controls, err = ListServed[InstanceManagerUpgradeControl](ctx, p.ri(InstanceManagerUpgradeControlsResource), InstanceManagerUpgradeControlsResource, p.ns); err != nil {
			return dataplane.LonghornUpgrader{}, err
		}
		if upgrades, err = ListServed[InstanceManagerUpgrade](ctx, p.ri(InstanceManagerUpgradesResource), InstanceManagerUpgradesResource, p.ns); err != nil {
			return dataplane.LonghornUpgrader{}, err
		}
	}
	return toUpgrader(settings, controls, upgrades), nil
}

// ListServed lists every object of a resource from the apiserver (not a
// cache), typed. A list is answered NotFound only when the resource is not
// served (its CRD was removed after detection, or a plane was told a profile
// the cluster does not have): then no object of it can exist, so that is no
// object rather than an error.
func ListServed[T any](ctx context.Context, ri dynamic.ResourceInterface, gvr schema.GroupVersionResource, namespace string) ([]*T, error) {
	l, err := ri.List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("longhorn: list %s in %s: %w", resourceName(gvr), namespace, err)
	}
	out := make([]*T, 0, len(l.Items))
	for i := range l.Items {
		t := new(T)
		if err := FromUnstructured(&l.Items[i], t); err != nil {
			return nil, fmt.Errorf("longhorn: list %s in %s: %w", resourceName(gvr), namespace, err)
		}
		out = append(out, t)
	}
	return out, nil
}
