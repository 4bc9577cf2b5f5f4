package sim

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/switchback-dev/switchback/dataplane"
)

// This file is the simulator's read side: dataplane.Reader, and the views
// of its state it exports.

// Platform reports the profile the simulator was configured with.
func (s *Sim) Platform(ctx context.Context) (dataplane.Platform, error) {
	if err := ctx.Err(); err != nil {
		return dataplane.Platform{}, err
	}
	return dataplane.Platform{
		Profile:         s.cfg.Profile,
		LonghornVersion: s.cfg.LonghornVersion,
		Evidence:        "simulated cluster configured with profile " + string(s.cfg.Profile),
	}, nil
}

// Nodes lists every existing node, sorted by name.
func (s *Sim) Nodes(ctx context.Context) ([]dataplane.Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick()
	out := make([]dataplane.Node, 0, len(s.nodeNames))
	for _, name := range s.nodeNames {
		out = append(out, s.nodes[name].export())
	}
	return out, nil
}

// Node returns one node or an error matching dataplane.ErrNotFound (also
// for a node deleted by a fault).
func (s *Sim) Node(ctx context.Context, name string) (dataplane.Node, error) {
	if err := ctx.Err(); err != nil {
		return dataplane.Node{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick()
	n, err := s.node(name)
	if err != nil {
		return dataplane.Node{}, err
	}
	return n.export(), nil
}

// DefaultInstanceManagerImage returns the image new v2 IMs get.
func (s *Sim) DefaultInstanceManagerImage(ctx context.Context) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.setting, nil
}

// InstanceManagers lists the v2 IMs of node, or of every node when node is
// "", sorted by node then age. On ProfileV112 a node whose IM runs another
// image than the default also lists the default-image IM Longhorn created
// for it, stopped until the old one is gone. An unknown node is an error
// matching ErrNotFound.
func (s *Sim) InstanceManagers(ctx context.Context, nodeName string) ([]dataplane.InstanceManager, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick()
	if nodeName != "" {
		n, err := s.node(nodeName)
		if err != nil {
			return nil, err
		}
		return s.exportIMs(n, nil), nil
	}
	var out []dataplane.InstanceManager
	for _, name := range s.nodeNames {
		out = s.exportIMs(s.nodes[name], out)
	}
	return out, nil
}

// Volumes lists every volume, v1 and v2, sorted by name.
func (s *Sim) Volumes(ctx context.Context) ([]dataplane.Volume, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick()
	out := make([]dataplane.Volume, 0, len(s.vols))
	for _, name := range s.sortedVolumeNames() {
		out = append(out, s.exportVolume(s.vols[name]))
	}
	return out, nil
}

// Volume implements dataplane.Reader.
func (s *Sim) Volume(ctx context.Context, name string) (dataplane.Volume, error) {
	if err := ctx.Err(); err != nil {
		return dataplane.Volume{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick()
	v, err := s.volume(name)
	if err != nil {
		return dataplane.Volume{}, err
	}
	return s.exportVolume(v), nil
}

// VolumesOn implements dataplane.Reader from the sim's per-node indexes, so
// a node step's cost does not grow with the cluster.
func (s *Sim) VolumesOn(ctx context.Context, nodeName string) ([]dataplane.Volume, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick()
	names := map[string]struct{}{}
	for _, idx := range []map[string]map[string]struct{}{s.targetsOn, s.attachedOn, s.replicasOn} {
		for name := range idx[nodeName] {
			names[name] = struct{}{}
		}
	}
	sorted := slices.Sorted(maps.Keys(names))
	out := make([]dataplane.Volume, 0, len(sorted))
	for _, name := range sorted {
		if v, ok := s.vols[name]; ok {
			out = append(out, s.exportVolume(v))
		}
	}
	return out, nil
}

// TargetCounts implements dataplane.Reader from a count kept up to date on
// every attach, detach and target move.
func (s *Sim) TargetCounts(ctx context.Context) (map[string]int, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick()
	return maps.Clone(s.hosted), nil
}

// LonghornUpgrader implements dataplane.Reader.
func (s *Sim) LonghornUpgrader(ctx context.Context) (dataplane.LonghornUpgrader, error) {
	if err := ctx.Err(); err != nil {
		return dataplane.LonghornUpgrader{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return cloneUpgrader(s.upgrader), nil
}

// SnapshotNames returns the names of a volume's user snapshots in
// creation order.
func (s *Sim) SnapshotNames(name string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, err := s.volume(name)
	if err != nil {
		return nil, err
	}
	return slices.Clone(v.snapshots), nil
}

// SnapshotsTaken counts the snapshots ever created (removed ones included).
func (s *Sim) SnapshotsTaken() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snapshotsTaken
}

// Baselines returns every v2 volume's spec.engineNodeID as its user set it
// (at build or with PlaceEngine), by volume: what an upgrade must leave in
// place.
func (s *Sim) Baselines() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	for name, v := range s.vols {
		if v.engine == EngineV2 {
			out[name] = v.baseline
		}
	}
	return out
}

func (n *node) export() dataplane.Node {
	return dataplane.Node{
		Name:               n.name,
		Ready:              n.ready,
		V2:                 n.v2,
		AllowScheduling:    n.allowSched,
		Images:             slices.Clone(n.images),
		Cordoned:           n.cordoned,
		ManagerIMImage:     n.managerImage,
		NVMeMultipath:      n.multipath,
		WorkloadTainted:    n.tainted,
		UpgradePendingMark: n.pending,
	}
}

func (s *Sim) exportIMs(n *node, out []dataplane.InstanceManager) []dataplane.InstanceManager {
	if n.im != nil {
		im := n.im.export()
		// Longhorn reports the instances of a running IM only.
		if n.im.state == dataplane.IMRunning {
			im.Engines, im.Frontends, im.Replicas = s.instances(n)
			im.Shards = n.shards
		}
		out = append(out, im)
	}
	if n.next != nil {
		out = append(out, n.next.export())
	}
	if n.gone != nil {
		out = append(out, n.gone.export())
	}
	return out
}

func (m *im) export() dataplane.InstanceManager {
	return dataplane.InstanceManager{
		Name:       m.name,
		Node:       m.node,
		Image:      m.image,
		DataEngine: dataplane.DataEngineV2,
		State:      m.state,
		Deleting:   m.deleting,
	}
}

func (s *Sim) exportVolume(v *volume) dataplane.Volume {
	out := v.export()
	out.ReplenishAt = s.replenishAt(v)
	out.NoReplicaReuse = !s.reuses(v)
	out.ActualSize = v.actualSize()
	out.Size = v.size
	out.Hashing = v.hashing()
	for i, r := range v.replicas {
		out.Replicas[i].RebuildProgress = r.rebuildProgress(s.now())
	}
	if n := s.nodes[v.attached]; n != nil {
		out.InitiatorMultipath = n.multipath
	}
	return out
}

func (v *volume) export() dataplane.Volume {
	out := dataplane.Volume{
		Name:               v.name,
		DataEngine:         v.engine,
		NumberOfReplicas:   v.numReplicas,
		ReplicaAutoBalance: v.autoBalance,
		DataLocality:       v.dataLocality,
		AttachedNode:       v.attached,
		TargetNode:         v.target,
		EngineNode:         v.engineNode,
		TargetReady:        v.engine == EngineV2 && v.attached != "" && v.sw == nil && v.targetIM.valid(),
		SwitchoverError:    v.swError,
		Frontend:           v.frontend,
		ShareManager:       v.shareManager,
		Robustness:         v.robustness(),
		Replicas:           make([]dataplane.Replica, len(v.replicas)),
	}
	if v.away != nil {
		a := *v.away
		out.Away = &a
	}
	if v.sw != nil {
		out.Switchover = v.sw.state
		out.PathsSwitching = v.sw.switchingPaths()
	}
	// v1 engines run in v1 instance managers, which the simulator does not model.
	engineRuns := v.engine != EngineV2 || v.targetIM.valid() || (v.sw != nil && v.sw.engine.valid())
	for i, r := range v.replicas {
		out.Replicas[i] = dataplane.Replica{Name: r.name, Node: r.node, State: r.state,
			Failed: r.failed, InEngine: r.inEngine && engineRuns, Running: r.instance}
	}
	return out
}

// rebuildProgress is the percentage of r's rebuild done at now (below 100
// until it ends).
func (r *replica) rebuildProgress(now time.Time) int {
	if r.state != dataplane.ReplicaRebuilding || !r.joined || r.rebuildFrom.IsZero() {
		return 0
	}
	if r.rebuildFor <= 0 {
		return 99
	}
	return min(99, int(100*now.Sub(r.rebuildFrom)/r.rebuildFor))
}

// IMInstances are the instances an IM runs, for a simulated Longhorn
// manager to render the IM's status maps (see Instances).
type IMInstances struct {
	// Engines and NewEngines name the volumes whose engine, or whose new
	// engine of a switch-over under way, runs in the IM; Frontends those
	// whose initiator does; Replicas the replicas.
	Engines, NewEngines, Frontends, Replicas []string
}

// VolumeInstances is what Longhorn shows of a volume's engine and
// initiator beyond dataplane.Volume.
type VolumeInstances struct {
	// EngineRunning: the engine runs in the process of the IM it started
	// in; InitiatorRunning likewise for the initiator (always true where
	// initiators survive their IM).
	EngineRunning, InitiatorRunning bool
	// SwitchoverTo is the destination of a switch-over under way, "" when
	// none; Switchovers counts the switch-overs completed.
	SwitchoverTo string
	Switchovers  uint64
	// NewEngineRunning: the switch-over's new engine runs.
	NewEngineRunning bool
	// PathPhase is the initiator's last completed switch-over phase, as its
	// EngineFrontend reports it: "", "preparing" or "switching".
	PathPhase string
	// DegradedAt is Longhorn's status.lastDegradedAt (zero while the volume
	// is not degraded).
	DegradedAt time.Time
	// DeadLinks are the replicas the engine's RAID still holds on a dead
	// link (their instance stopped while it held them).
	DeadLinks []string
}

// Instances returns, by IM name, what each node's serving IM runs (only
// a running IM reports instances), and, by volume, what its engine
// and initiator are doing: the state a simulated Longhorn manager renders
// into IM, Engine and EngineFrontend objects.
func (s *Sim) Instances() (map[string]IMInstances, map[string]VolumeInstances) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick()
	ims := map[string]IMInstances{}
	for _, name := range s.nodeNames {
		n := s.nodes[name]
		if n.im != nil && n.im.state == dataplane.IMRunning {
			ims[n.im.name] = s.instanceNames(n)
		}
	}
	vols := make(map[string]VolumeInstances, len(s.vols))
	for name, v := range s.vols {
		vi := VolumeInstances{
			EngineRunning:    v.engine != EngineV2 || v.targetIM.valid(),
			InitiatorRunning: s.initiatorDown(v) == nil,
			Switchovers:      v.swDone,
		}
		if v.sw != nil {
			vi.SwitchoverTo = v.sw.dest
			vi.NewEngineRunning = v.sw.engine.valid()
			switch {
			case v.sw.state != dataplane.SwitchoverSwitchingOver:
			case v.sw.ef == efPreparing:
				vi.PathPhase = "preparing"
			case v.sw.ef == efSwitching:
				vi.PathPhase = "switching"
			}
		}
		if !v.degradedAt.IsZero() && v.attached != "" {
			vi.DegradedAt = v.degradedAt.Truncate(time.Second)
		}
		for _, r := range v.replicas {
			if r.linkDown && r.inEngine {
				vi.DeadLinks = append(vi.DeadLinks, r.name)
			}
		}
		vols[name] = vi
	}
	return ims, vols
}

// RebuildSettings implements dataplane.Reader: Config.ReplicaReplenishWait.
func (s *Sim) RebuildSettings(ctx context.Context) (dataplane.RebuildSettings, error) {
	if err := ctx.Err(); err != nil {
		return dataplane.RebuildSettings{}, err
	}
	return dataplane.RebuildSettings{ReplenishWait: s.cfg.ReplicaReplenishWait}, nil
}

// Disks implements dataplane.Reader: each node's one disk (see disk).
func (s *Sim) Disks(ctx context.Context) (map[string][]dataplane.Disk, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick()
	out := make(map[string][]dataplane.Disk, len(s.nodeNames))
	for _, name := range s.nodeNames {
		out[name] = []dataplane.Disk{s.disk(s.nodes[name])}
	}
	return out, nil
}
