package sim

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/switchback-dev/switchback/dataplane"
)

// ErrInvalid reports a builder call that describes an impossible cluster.
var ErrInvalid = errors.New("invalid cluster description")

// NodeSpec describes a node for AddNodeSpec. The zero value (plus a name) is
// a Ready v2 node whose IM runs Config.IMImage, with that image and the
// default IM image pulled.
type NodeSpec struct {
	Name string
	// NotReady builds the node NotReady; this counts as an injected
	// FaultNodeNotReady (heal it with HealNodeNotReady).
	NotReady bool
	// NoV2 builds a node without the v2 data engine (and without a v2 IM).
	NoV2 bool
	// IMImage overrides Config.IMImage for this node's IM.
	IMImage string
	// Images overrides the images present on the node (nil = default).
	Images []string
	// NoScheduling builds the node with spec.allowScheduling false.
	NoScheduling bool
	// Shards is the number of erasure-coded shard instances its IM runs.
	Shards int
	// ManagerImage is the --instance-manager-image its longhorn-manager
	// runs with ("" = Config.DefaultIMImage): another one is a manager
	// DaemonSet not rolled out there yet, and no default-image IM is made
	// for the node (RuleDefaultIMFollowsSetting).
	ManagerImage string
	// NoMultipath builds the node with a kernel whose nvme_core.multipath
	// is N: a switch-over of a blockdev volume attached there loses its
	// path (RuleNoSecondPathWithoutMultipath).
	NoMultipath bool
	// Storage is the size in bytes of the node's one block disk, DiskName
	// (0 = DefaultStorage): a new replica lands only where it fits
	// (RuleReplicaSpace).
	Storage int64
}

// DiskName is the name of every simulated node's one disk.
const DiskName = "disk-1"

// DefaultStorage is a node's disk size when NodeSpec.Storage is 0: room
// for anything a test builds.
const DefaultStorage int64 = 1 << 50

// AddNode adds a Ready v2 node with a running IM on Config.IMImage.
func (s *Sim) AddNode(name string) error {
	return s.AddNodeSpec(NodeSpec{Name: name})
}

// AddNodeSpec adds a node described by spec.
func (s *Sim) AddNodeSpec(spec NodeSpec) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if spec.Name == "" {
		return fmt.Errorf("add node: empty name: %w", ErrInvalid)
	}
	if s.nodes[spec.Name] != nil || s.deleted[spec.Name] != nil {
		return fmt.Errorf("add node %q: already exists: %w", spec.Name, ErrInvalid)
	}
	image := spec.IMImage
	if image == "" {
		image = s.cfg.IMImage
	}
	images := spec.Images
	if images == nil {
		images = []string{image, s.cfg.DefaultIMImage}
	}
	images = slices.Clone(images)
	slices.Sort(images)
	manager := spec.ManagerImage
	if manager == "" {
		manager = s.cfg.DefaultIMImage
	}
	n := &node{name: spec.Name, ready: true, v2: !spec.NoV2, allowSched: !spec.NoScheduling, images: slices.Compact(images),
		managerImage: manager, shards: spec.Shards, multipath: dataplane.MultipathOn, storage: cmp.Or(spec.Storage, DefaultStorage)}
	if spec.NoMultipath {
		n.multipath = dataplane.MultipathOff
	}
	if n.v2 {
		n.imSeq = 1
		n.im = &im{name: fmt.Sprintf("im-%s-1", n.name), node: n.name, image: image, state: dataplane.IMRunning, epoch: 1}
		s.ims[n.im.name] = n.im
		s.expectNext(n, s.now())
	}
	s.insertNode(n)
	if spec.NotReady {
		s.faults.notReady[n.name] = true
		n.ready = false
	}
	s.activateArmedFor(n.name)
	s.unblock = true
	s.changes.Notify()
	return nil
}

func (s *Sim) insertNode(n *node) {
	s.nodes[n.name] = n
	i, _ := slices.BinarySearch(s.nodeNames, n.name)
	s.nodeNames = slices.Insert(s.nodeNames, i, n.name)
}

// SetNodeImages replaces the images present on a node, e.g. to test the
// DefaultImageOnAllNodesReady precheck with an image missing.
func (s *Sim) SetNodeImages(nodeName string, images []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.node(nodeName)
	if err != nil {
		return fmt.Errorf("set images: %w", err)
	}
	images = slices.Clone(images)
	slices.Sort(images)
	n.images = slices.Compact(images)
	s.changes.Notify()
	return nil
}

// VolumeSpec describes a volume for AddVolumeSpec.
type VolumeSpec struct {
	Name string
	// Engine is EngineV1 or EngineV2 ("" means v2).
	Engine string
	// ReplicasOn lists the nodes holding a running replica, one per node.
	ReplicasOn []string
	// NumberOfReplicas is the desired count; 0 means len(ReplicasOn). A
	// larger value builds a degraded volume.
	NumberOfReplicas int
	// AttachedTo is the attached node (the initiator, and the engine unless
	// EngineOn says otherwise); "" = detached.
	AttachedTo string
	// EngineOn is spec.engineNodeID, as the volume's user set it: the engine
	// runs there when the volume is attached.
	EngineOn string
	// Frontend is spec.frontend; "" means blockdev (NVMe/TCP), NoFrontend
	// none.
	Frontend string
	// Allocated is the bytes each replica holds at the start (in its
	// head: no snapshot yet); WriteRate the bytes per second its workload
	// writes while it is attached (data.go).
	Allocated, WriteRate int64
	// Size is spec.size, what each replica takes of its disk's
	// scheduling limit (0 = Allocated).
	Size int64
	// ShareManager makes it an RWX volume served by a share-manager pod
	// (dataplane.Volume.ShareManager): Longhorn attaches it where that pod
	// runs, which longhornsim plays (Options.VolumeAttachments).
	ShareManager bool
	// IntegrityDisabled plays snapshot data integrity disabled for it: an
	// on-demand hashing request is ignored and never completes.
	IntegrityDisabled bool
	// ReplicaAutoBalance and DataLocality are spec.replicaAutoBalance and
	// spec.dataLocality; "" means Longhorn's defaults, ignored (the
	// global setting: disabled) and disabled.
	ReplicaAutoBalance, DataLocality string
}

// NoFrontend is VolumeSpec.Frontend for a volume without a frontend.
const NoFrontend = "none"

// AddVolume adds a volume with one running replica on each of replicasOn,
// attached to attachedTo ("" = detached) with its target there.
func (s *Sim) AddVolume(name, engine string, replicasOn []string, attachedTo string) error {
	return s.AddVolumeSpec(VolumeSpec{Name: name, Engine: engine, ReplicasOn: replicasOn, AttachedTo: attachedTo})
}

// AddVolumeSpec adds a volume described by spec.
func (s *Sim) AddVolumeSpec(spec VolumeSpec) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkVolumeSpec(&spec); err != nil {
		return fmt.Errorf("add volume %q: %w", spec.Name, err)
	}
	v := &volume{name: spec.Name, engine: spec.Engine, numReplicas: spec.NumberOfReplicas, frontend: spec.Frontend,
		engineNode: spec.EngineOn, baseline: spec.EngineOn, shareManager: spec.ShareManager, writeRate: spec.WriteRate, wroteAt: s.now(),
		integrityDisabled: spec.IntegrityDisabled, redundancy: min(spec.NumberOfReplicas, len(spec.ReplicasOn)), size: cmp.Or(spec.Size, spec.Allocated),
		autoBalance: cmp.Or(spec.ReplicaAutoBalance, defaultAutoBalance), dataLocality: cmp.Or(spec.DataLocality, defaultDataLocality)}
	for _, nodeName := range spec.ReplicasOn {
		v.replicaSeq++
		v.replicas = append(v.replicas, &replica{
			name:  fmt.Sprintf("%s-r-%d", v.name, v.replicaSeq),
			node:  nodeName,
			state: dataplane.ReplicaRunning,
			data:  replicaData{head: spec.Allocated},
		})
		addIdx(s.replicasOn, nodeName, v.name)
	}
	for _, r := range v.replicas {
		// A replica placed on a NotReady node is failed, as Longhorn would
		// report it, and attributed to the node's fault.
		if !s.nodes[r.node].ready {
			s.loseReplica(v, r, true, s.now())
		}
	}
	s.vols[v.name] = v
	if v.writeRate > 0 {
		s.writing[v.name] = struct{}{}
	}
	s.volNames = append(s.volNames, v.name)
	s.volSorted = false
	if spec.AttachedTo != "" {
		s.setAttached(v, spec.AttachedTo)
		s.setTarget(v, v.desired())
		s.startReplicas(v, s.now())
	}
	s.reconcile[v.name] = struct{}{}
	s.markVolume(v.name)
	s.changes.Notify()
	return nil
}

func (s *Sim) checkVolumeSpec(spec *VolumeSpec) error {
	if spec.Name == "" {
		return fmt.Errorf("empty name: %w", ErrInvalid)
	}
	if s.vols[spec.Name] != nil {
		return fmt.Errorf("already exists: %w", ErrInvalid)
	}
	if spec.Engine == "" {
		spec.Engine = EngineV2
	}
	if spec.Engine != EngineV1 && spec.Engine != EngineV2 {
		return fmt.Errorf("data engine %q: %w", spec.Engine, ErrInvalid)
	}
	if spec.NumberOfReplicas == 0 {
		spec.NumberOfReplicas = len(spec.ReplicasOn)
	}
	if spec.NumberOfReplicas < 1 || spec.NumberOfReplicas < len(spec.ReplicasOn) {
		return fmt.Errorf("numberOfReplicas %d for %d replicas: %w", spec.NumberOfReplicas, len(spec.ReplicasOn), ErrInvalid)
	}
	seen := map[string]bool{}
	for _, nodeName := range spec.ReplicasOn {
		n, err := s.node(nodeName)
		if err != nil {
			return err
		}
		if seen[nodeName] {
			return fmt.Errorf("two replicas on node %q: %w", nodeName, ErrInvalid)
		}
		seen[nodeName] = true
		if spec.Engine == EngineV2 && !n.v2 {
			return fmt.Errorf("v2 replica on node %q without the v2 engine: %w", nodeName, ErrInvalid)
		}
	}
	for _, nodeName := range []string{spec.AttachedTo, spec.EngineOn} {
		if nodeName == "" {
			continue
		}
		n, err := s.node(nodeName)
		if err != nil {
			return err
		}
		if spec.Engine == EngineV2 && !n.v2 {
			return fmt.Errorf("v2 engine on node %q without the v2 engine: %w", nodeName, ErrInvalid)
		}
	}
	if spec.EngineOn != "" && spec.Engine != EngineV2 {
		return fmt.Errorf("engine node on a v1 volume: %w", ErrInvalid)
	}
	switch spec.Frontend {
	case "":
		spec.Frontend = dataplane.FrontendBlockdev
	case NoFrontend:
		spec.Frontend = ""
	case dataplane.FrontendBlockdev, dataplane.FrontendNVMf, dataplane.FrontendUblk, dataplane.FrontendISCSI:
	default:
		return fmt.Errorf("frontend %q: %w", spec.Frontend, ErrInvalid)
	}
	return nil
}

// ThreeNodes builds the standard small cluster of the engine, projector and
// Longhorn tests: v2 nodes n1, n2 and n3 and six v2 volumes vol-0…vol-5 with
// 2 or 3 replicas, attached so that every node hosts a target (vol-0,
// vol-1 and vol-2 on n1, vol-3 on n2, vol-5 on n3) and one detached (vol-4).
func ThreeNodes(cfg Config) (*Sim, error) {
	s := New(cfg)
	for _, n := range []string{"n1", "n2", "n3"} {
		if err := s.AddNode(n); err != nil {
			return nil, err
		}
	}
	for i, v := range []struct {
		on       []string
		attached string
	}{
		{[]string{"n1", "n2", "n3"}, "n1"},
		{[]string{"n1", "n2"}, "n1"},
		{[]string{"n2", "n3"}, "n1"},
		{[]string{"n1", "n3"}, "n2"},
		{[]string{"n1", "n2", "n3"}, ""},
		{[]string{"n2", "n3"}, "n3"},
	} {
		if err := s.AddVolume(fmt.Sprintf("vol-%d", i), EngineV2, v.on, v.attached); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// SetLonghornUpgrader sets what Longhorn's own instance-manager upgrader
// shows (its settings and objects), as an operator or Longhorn would change
// them; the simulated Longhorn never runs that upgrader.
func (s *Sim) SetLonghornUpgrader(u dataplane.LonghornUpgrader) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.upgrader = cloneUpgrader(u)
	s.changes.Notify()
}

func cloneUpgrader(u dataplane.LonghornUpgrader) dataplane.LonghornUpgrader {
	out := dataplane.LonghornUpgrader{Settings: maps.Clone(u.Settings), Upgrades: slices.Clone(u.Upgrades)}
	for _, c := range u.Controls {
		c.Nodes = maps.Clone(c.Nodes)
		out.Controls = append(out.Controls, c)
	}
	return out
}
