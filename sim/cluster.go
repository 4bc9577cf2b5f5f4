// Package sim is a simulated Longhorn v2 (SPDK) cluster behind
// dataplane.DataPlane, for the engine tests, the property test, the demo and
// the benchmarks.
//
// It models what a live upgrade of the v2 data engine depends on, with the
// physics of the Longhorn profile it is configured with (Config.Profile):
// nodes and their readiness and replica scheduling, one v2 instance manager
// (IM) per node holding the node's engines, engine frontends and replicas,
// volumes with an initiator (the attached node) and an engine (the target)
// moved by Longhorn's switch-over when spec.engineNodeID changes, and
// replicas rebuilt when lost.
//
//   - dataplane.ProfileV112: the initiator lives in the IM of the attached
//     node, so stopping that IM faults the volume; Longhorn replaces a
//     node's old-image IM with a default-image one as soon as the old one
//     runs no instance.
//   - dataplane.ProfileInPlace: the initiator is a kernel client that
//     survives its node's IM restart; the upgrade sets the IM's image and
//     the same IM restarts on it.
//
// Longhorn's reactions (switch-overs, IM starts, rebuilds) take configurable
// latencies measured on an injectable Clock and are applied lazily, whenever
// the simulator is read or acted upon, so no goroutine is needed and runs
// are deterministic.
//
// After every state change an I/O checker sends one I/O to every attached
// volume and records those that would fail (IOStats), which is how a test
// proves that an upgrade never interrupts volume I/O. Faults can be injected
// and healed at any time, or armed up front to fire mid-upgrade.
//
// Reads of one object cost O(size of that object): the simulator keeps
// per-node indexes and re-evaluates I/O only for volumes whose path changed.
package sim

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/switchback-dev/switchback/dataplane"
)

// Images used as defaults by New and by the generator.
const (
	// OldIMImage is the image the IMs built by AddNode and Random run.
	OldIMImage = "longhornio/longhorn-instance-manager:v1.12.0"
	// NewIMImage is the default IM image (the upgrade's target) unless
	// Config.DefaultIMImage says otherwise; the generator pulls it everywhere.
	NewIMImage = "longhornio/longhorn-instance-manager:v1.12.1"
)

// Data engines a volume can use.
const (
	EngineV1 = "v1"
	EngineV2 = dataplane.DataEngineV2
)

// Config holds the knobs of a simulated cluster. The zero value is a usable
// v1.12 cluster with a real clock and zero latencies.
type Config struct {
	// Profile is the physics of the simulated Longhorn; "" means
	// dataplane.ProfileV112, released Longhorn.
	Profile dataplane.Profile
	// LonghornVersion is what the cluster reports as its version; "" means
	// none (Platform then reports only the profile).
	LonghornVersion string
	// Clock measures every latency; nil means RealClock.
	Clock Clock
	// DefaultIMImage is the image Longhorn gives new v2 IMs; "" means NewIMImage.
	DefaultIMImage string
	// IMImage is the image of the IMs AddNode creates; "" means OldIMImage.
	IMImage string
	// TargetMoveLatency is how long a switch-over takes once requested (half
	// preparing the new engine, half switching the initiator's path). Zero,
	// like the other latencies, means "done on the next read".
	TargetMoveLatency time.Duration
	// IMStartLatency is how long a new (or re-imaged) IM takes to run.
	IMStartLatency time.Duration
	// RebuildLatency is how long a replica rebuild takes.
	RebuildLatency time.Duration
	// ReplicaReplenishWait is how long a lost replica waits for its own node
	// to become eligible again before being rebuilt on another node, like
	// Longhorn's replica-replenishment-wait-interval. Zero rebuilds elsewhere
	// at once when the node is not eligible; negative waits forever.
	ReplicaReplenishWait time.Duration
	// RebuildBandwidth, in bytes per second, makes a rebuild last the
	// bytes it copies (data.go) over it; zero: RebuildLatency, whatever it
	// copies.
	RebuildBandwidth int64
	// NoFastReplicaRebuild plays Longhorn's fast-replica-rebuild-enabled
	// set to false for v2: a failed v2 replica is never reused, nor waited
	// for, and a new replica is built elsewhere at once.
	NoFastReplicaRebuild bool
	// HashBandwidth, in bytes per second, makes an on-demand hashing
	// request last what it reads over it (every user snapshot of every
	// serving replica, read on their nodes at once); zero: done at the next
	// read.
	HashBandwidth int64
	// ReplicaStartLatency is how long a reused or new replica's instance
	// takes to start before it joins its engine, where its rebuild begins.
	ReplicaStartLatency time.Duration
	// ReplicaRemoveLatency is how long an engine takes to remove a failed
	// replica from its RAID: Longhorn's engine monitor (every 5 s) names
	// it UNKNOWN-<address>, then removes it asynchronously.
	ReplicaRemoveLatency time.Duration
	// ReplicaIOTimeout is how long an engine's I/O waits on a replica whose
	// instance is gone before its RAID fails it out: the replica link's
	// fast-io-fail timeout, 10 s in SPDK (ReplicaIOTimeout) when zero.
	ReplicaIOTimeout time.Duration
	// NodeReconcileLatency is how long Longhorn's node controller takes to
	// notice that an old-image IM went idle and delete it (its resync is 30
	// s); zero deletes it at once.
	NodeReconcileLatency time.Duration
	// PodTerminationLatency is how long a deleted IM's pod lingers (its
	// preStop hook and the 30 s grace period by default), its SPDK target
	// holding the node's hugepages and disks until it is gone.
	PodTerminationLatency time.Duration
	// StorageNetwork gives engines a storage IP apart from their pod IP
	// (Longhorn's storage-network setting), for the simulated manager.
	StorageNetwork bool
	// Disable switches Longhorn rules off (see Rules), to show that a test
	// depends on one.
	Disable []Rule
	// Faults are armed when the simulator is created (see Arm).
	Faults []Fault
	// FullRedundancy makes Unsafe hold every attached volume to the
	// healthy replicas it was built with, on as many nodes (the
	// no-degradation policy, spec.replicaPolicy add-first); without it,
	// to one.
	FullRedundancy bool
	// IOLogLimit bounds the I/O failure log (episodes kept); 0 means 1000.
	IOLogLimit int
	// ActionLogLimit bounds the action log; 0 means 100000.
	ActionLogLimit int
}

// Sim is a simulated cluster. It is safe for concurrent use: one mutex guards
// the whole state and every read copies values out.
type Sim struct {
	mu    sync.Mutex
	cfg   Config
	clock Clock

	nodes     map[string]*node
	nodeNames []string         // existing nodes, sorted
	deleted   map[string]*node // deleted nodes, kept so a heal can restore them
	ims       map[string]*im   // live IMs by name
	imGone    map[string]bool  // IMs removed: deleting again is a no-op

	vols      map[string]*volume
	volNames  []string
	volSorted bool

	// pods are the workload pods, by namespace/name; podSeq numbers their
	// uids and the names of the pods their controllers recreate.
	pods   map[string]*pod
	podSeq int
	// restarts counts each workload's evictions (Restarts).
	restarts map[string]int
	// rebuilds are the rebuilds counted in bytes (RebuildRecords);
	// writing the volumes with a WriteRate.
	rebuilds []RebuildRecord
	// hashGen tells a hashing request's timer from a later request's;
	// hashRead counts the bytes every finished request read.
	hashGen  uint64
	hashRead int64
	// hashBusy is, by node, until when its Longhorn manager hashes the
	// requests already queued there (one at a time).
	hashBusy map[string]time.Time
	writing  map[string]struct{}

	// Per-node indexes keep single-object work independent of cluster size.
	targetsOn   map[string]map[string]struct{} // node → volumes whose current target is there
	attachedOn  map[string]map[string]struct{} // node → volumes attached there
	replicasOn  map[string]map[string]struct{} // node → volumes with a replica entry there
	migratingTo map[string]map[string]struct{} // node → volumes switching their target over to it
	hosted      map[string]int                 // node → volumes whose TargetHost is there
	attached    int

	timers timerHeap
	seq    uint64

	// Work that waits for a condition instead of a time: re-examined when an
	// eligibility event (IM running, node Ready, scheduling allowed, heal)
	// happens.
	reconcile      map[string]struct{} // volumes whose replica count must be checked
	waiting        map[string]struct{} // volumes short of replicas with no eligible node yet
	pendingSwitch  map[string]struct{} // volumes whose switch-over cannot proceed yet
	blockedIMs     map[string]struct{} // nodes whose new IM waits for the node (Ready, uncordoned, no lingering pod)
	imCheck        map[string]struct{} // nodes whose old-image IM may have become empty
	unblock        bool
	placeCursor    int
	snapshotsTaken int
	// setting is the default-instance-manager-image setting as it reads;
	// the node controller creates IMs of cfg.DefaultIMImage, the same
	// unless RuleDefaultIMFollowsSetting is off.
	setting string
	// overlaps are the IM pods started beside a lingering one (Unsafe).
	overlaps []string
	// shardsLost are the shard instances cut with the IM that ran them.
	shardsLost []string

	faults  faultSet
	io      ioChecker
	counts  imCounts
	actions actionLog
	// upgrader is what Longhorn's own instance-manager upgrader shows, as a
	// test sets it; the simulated Longhorn never runs it.
	upgrader dataplane.LonghornUpgrader

	// changes signals every change to watchers (Changed); wake, due at
	// wakeAt, applies the earliest pending completion on a wall clock.
	changes dataplane.Changes
	wake    *time.Timer
	wakeAt  time.Time
}

type node struct {
	name       string
	ready      bool
	v2         bool
	allowSched bool
	cordoned   bool
	// tainted: the Kubernetes node carries dataplane.WorkloadTaintKey.
	tainted bool
	// pending is the value of its dataplane.UpgradePendingTaintKey
	// mark, "" without one.
	pending string
	images  []string
	// managerImage is the --instance-manager-image of the node's
	// longhorn-manager: Longhorn creates the node's default-image IM only
	// when it is the default.
	managerImage string
	// shards counts the erasure-coded shard instances the node's IM runs.
	shards int
	// multipath is the node's kernel nvme_core.multipath, as its worker
	// reports it.
	multipath dataplane.Multipath
	// storage is the size of its one disk (NodeSpec.Storage).
	storage int64
	// im is the IM serving the node (running, starting or in error); nil on
	// a node without the v2 engine.
	im *im
	// next is, on ProfileV112, the default-image IM Longhorn created while
	// im runs another image: stopped until im is gone.
	next *im
	// gone is a deleted IM whose pod still terminates: its object stays
	// (deleting) after a foreground delete, and the node's next IM waits.
	gone *im
	// podUntil is when the last deleted IM's pod is gone: an IM pod started
	// before then overlaps it.
	podUntil time.Time
	// replaceAt is when Longhorn's node controller deletes the node's idle
	// old-image IM (NodeReconcileLatency after it went idle).
	replaceAt time.Time
	imSeq     int
}

type im struct {
	name  string
	node  string
	image string
	state dataplane.IMState
	// gen identifies timers scheduled for the IM's current state.
	gen uint64
	// epoch counts the IM's runs: instances bound to it (engines, and on
	// ProfileV112 initiators) are lost when it stops or restarts.
	epoch uint64
	// byFault marks an IM lost to an injected fault (its node deleted).
	byFault bool
	// deleting marks an IM whose object is being deleted in the foreground:
	// listed (Deleting) until its pod is gone.
	deleting bool
}

// binding is an instance hosted by an IM process.
type binding struct {
	im    *im
	epoch uint64
}

// valid reports whether the IM still runs the process the instance was
// started in.
func (b binding) valid() bool {
	return b.im != nil && b.im.state == dataplane.IMRunning && b.im.epoch == b.epoch
}

type volume struct {
	name        string
	engine      string
	numReplicas int
	frontend    string
	// size is spec.size (VolumeSpec.Size).
	size int64
	// writeRate is the bytes per second its workload writes while
	// attached; wroteAt when they were last counted (data.go).
	writeRate int64
	wroteAt   time.Time
	// shareManager: an RWX volume served by a share-manager pod, which
	// runs where the volume is attached; smUID is that pod's uid.
	shareManager bool
	smUID        string
	attached     string
	// initiator is the IM hosting the engine frontend (ProfileV112 only).
	initiator binding
	// target is status.currentEngineNodeID; targetIM the IM its engine runs in.
	target   string
	targetIM binding
	// engineNode is spec.engineNodeID; baseline the value the user set, which
	// Unsafe compares it with.
	engineNode string
	baseline   string
	sw         *switchover
	swGen      uint64
	swDone     uint64 // switch-overs completed
	swError    string
	// away is the controller's record of the target away (Volume.Away):
	// kept as written, Longhorn's physics ignore it.
	away *dataplane.TargetAway
	// pathDown is why the initiator has no usable path although its target
	// runs ("" when it has one): a switch-over withdrawn or reverted after
	// the old path was made inaccessible. Its I/O queues until a later
	// switch-over connects a new path.
	pathDown   string
	replicas   []*replica
	replicaSeq int
	gone       map[string]struct{} // deleted replica names: acting on them again is a no-op
	snapshots  []string
	// degradedAt is Longhorn's status.lastDegradedAt: when the attached
	// volume last fell short of replicas; zero while it is not.
	degradedAt time.Time
	// recheckAt is when a timer looks at the replicas again (the
	// replenishment wait), zero when none is armed.
	recheckAt time.Time
	// hashRequested and hashCompleted are the on-demand hashing request
	// and its completion (dataplane.SnapshotHashing), zero when unset;
	// integrityDisabled is snapshot data integrity disabled for it.
	hashRequested, hashCompleted time.Time
	integrityDisabled            bool
	hashGen                      uint64
	// autoBalance and dataLocality are spec.replicaAutoBalance and
	// spec.dataLocality (replicacount.go).
	autoBalance, dataLocality string
	// redundancy is the healthy replicas it was built with, at most its
	// numberOfReplicas: what the redundancy invariant holds it to
	// (Config.FullRedundancy).
	redundancy int
}

// replica is one replica: its health (state), and what Longhorn's objects
// and the SPDK processes hold of it.
type replica struct {
	name  string
	node  string
	state dataplane.ReplicaState
	// failed is spec.failedAt: set by FailReplica or when its instance
	// failed, cleared when Longhorn reuses it.
	failed   bool
	failedAt time.Time
	// instance: its process runs (or starts) in its node's IM.
	instance bool
	// inEngine: the volume's engine holds it in its RAID.
	inEngine bool
	// joined: a rebuilding replica has joined its engine (WO); until then
	// its instance is starting.
	joined bool
	// linkDown: its instance stopped while the engine still held it; the
	// engine's I/O waits on the dead link until it fails it out.
	linkDown bool
	gen      uint64
	salvage  bool // rebuilt from its own data because no healthy source was left
	byFault  bool // lost to an injected fault, for I/O failure attribution
	// data is what it holds, in bytes (data.go).
	data replicaData
	// rebuildFrom and rebuildFor are when its rebuild's copy began and how
	// long it takes (its progress), zero when none is under way.
	rebuildFrom time.Time
	rebuildFor  time.Duration
}

// New returns an empty cluster; add nodes and volumes with the builder
// methods. It panics if cfg holds an invalid profile or fault, a
// programming error.
func New(cfg Config) *Sim {
	if cfg.Profile == "" {
		cfg.Profile = dataplane.ProfileV112
	}
	if !cfg.Profile.Valid() {
		panic(fmt.Sprintf("sim.New: unknown profile %q", cfg.Profile))
	}
	if cfg.Clock == nil {
		cfg.Clock = RealClock{}
	}
	if cfg.DefaultIMImage == "" {
		cfg.DefaultIMImage = NewIMImage
	}
	if cfg.IMImage == "" {
		cfg.IMImage = OldIMImage
	}
	if cfg.ReplicaIOTimeout <= 0 {
		cfg.ReplicaIOTimeout = ReplicaIOTimeout
	}
	if cfg.IOLogLimit <= 0 {
		cfg.IOLogLimit = 1000
	}
	if cfg.ActionLogLimit <= 0 {
		cfg.ActionLogLimit = 100000
	}
	s := &Sim{
		cfg:           cfg,
		clock:         cfg.Clock,
		nodes:         map[string]*node{},
		deleted:       map[string]*node{},
		ims:           map[string]*im{},
		pods:          map[string]*pod{},
		restarts:      map[string]int{},
		writing:       map[string]struct{}{},
		imGone:        map[string]bool{},
		vols:          map[string]*volume{},
		volSorted:     true,
		targetsOn:     map[string]map[string]struct{}{},
		hosted:        map[string]int{},
		attachedOn:    map[string]map[string]struct{}{},
		replicasOn:    map[string]map[string]struct{}{},
		migratingTo:   map[string]map[string]struct{}{},
		reconcile:     map[string]struct{}{},
		waiting:       map[string]struct{}{},
		pendingSwitch: map[string]struct{}{},
		blockedIMs:    map[string]struct{}{},
		imCheck:       map[string]struct{}{},
		faults:        newFaultSet(),
		io:            newIOChecker(cfg.IOLogLimit),
		counts:        newIMCounts(),
		actions:       actionLog{limit: cfg.ActionLogLimit},
		setting:       cfg.DefaultIMImage,
	}
	for _, f := range cfg.Faults {
		if err := s.arm(f); err != nil {
			panic(fmt.Sprintf("sim.New: %v", err))
		}
	}
	return s
}

// Clock returns the clock the simulator measures latencies with.
func (s *Sim) Clock() Clock { return s.clock }

// Profile returns the physics the simulator follows.
func (s *Sim) Profile() dataplane.Profile { return s.cfg.Profile }

var _ dataplane.DataPlane = (*Sim)(nil)

func (s *Sim) node(name string) (*node, error) {
	n := s.nodes[name]
	if n == nil {
		return nil, fmt.Errorf("node %q: %w", name, dataplane.ErrNotFound)
	}
	return n, nil
}

func (s *Sim) volume(name string) (*volume, error) {
	v := s.vols[name]
	if v == nil {
		return nil, fmt.Errorf("volume %q: %w", name, dataplane.ErrNotFound)
	}
	return v, nil
}

// sortedVolumeNames sorts lazily: building a large cluster appends thousands
// of names and only listings need the order.
func (s *Sim) sortedVolumeNames() []string {
	if !s.volSorted {
		slices.Sort(s.volNames)
		s.volSorted = true
	}
	return s.volNames
}

// imRunning reports whether the node's IM serves instances; an IM on a
// NotReady node is unreachable whatever its state.
func (n *node) imRunning() bool {
	return n.ready && n.im != nil && n.im.state == dataplane.IMRunning
}

// bind starts an instance in the node's running IM.
func (n *node) bind() binding {
	if n == nil || n.im == nil {
		return binding{}
	}
	return binding{im: n.im, epoch: n.im.epoch}
}

// desired is where the engine should run: spec.engineNodeID, else the
// attached node.
func (v *volume) desired() string {
	if v.engineNode != "" {
		return v.engineNode
	}
	return v.attached
}

func (v *volume) count(states ...dataplane.ReplicaState) int {
	n := 0
	for _, r := range v.replicas {
		if slices.Contains(states, r.state) {
			n++
		}
	}
	return n
}

// active counts replicas that are or will be healthy without a new rebuild.
func (v *volume) active() int {
	return v.count(dataplane.ReplicaRunning, dataplane.ReplicaRebuilding)
}

// active reports whether the replica is or will be healthy without a new
// rebuild: it serves or is being rebuilt.
func (r *replica) active() bool {
	return r.state == dataplane.ReplicaRunning || r.state == dataplane.ReplicaRebuilding
}

// rebuildingInEngine counts the replicas Longhorn counts as rebuilding
// (WO, or in the engine with no mode yet): those that joined their engine
// and are not healthy yet.
func (v *volume) rebuildingInEngine() int {
	n := 0
	for _, r := range v.replicas {
		if r.state == dataplane.ReplicaRebuilding && r.joined {
			n++
		}
	}
	return n
}

// activeReplicaOn is the volume's replica on nodeName if it is active, else
// nil.
func (v *volume) activeReplicaOn(nodeName string) *replica {
	if r := v.replicaOn(nodeName); r != nil && r.active() {
		return r
	}
	return nil
}

func (v *volume) replicaOn(nodeName string) *replica {
	for _, r := range v.replicas {
		if r.node == nodeName {
			return r
		}
	}
	return nil
}

func (v *volume) replicaNamed(name string) (*replica, int) {
	for i, r := range v.replicas {
		if r.name == name {
			return r, i
		}
	}
	return nil, -1
}

// robustness follows Longhorn: it counts running replicas against the
// desired number. Detached volumes are summarised the same way (Longhorn
// says "unknown") so that a test can wait for any volume to be whole again.
func (v *volume) robustness() dataplane.Robustness {
	return dataplane.RobustnessOf(v.count(dataplane.ReplicaRunning), v.numReplicas)
}

func (s *Sim) now() time.Time { return s.clock.Now() }
