// Package sim is a simulated Longhorn v2 (SPDK) cluster behind
// dataplane.DataPlane, for the engine tests, the property test, the demo and
// the benchmarks.
//
// It models what a live upgrade of the v2 data engine depends on: nodes and
// their readiness, one v2 instance manager (IM) per node holding every v2
// target and replica of that node, volumes with an initiator (the attached
// node), a target that can be moved to another node, and replicas that are
// rebuilt when lost. Longhorn's reactions (target moves, IM restarts,
// rebuilds) take configurable latencies measured on an injectable Clock and
// are applied lazily, whenever the simulator is read or acted upon, so no
// goroutine is needed and runs are deterministic.
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
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/switchback-dev/switchback/dataplane"
)

// Images used as defaults by New and by the generator.
const (
	// OldIMImage is the image the IMs built by AddNode and Random run.
	OldIMImage = "longhornio/longhorn-instance-manager:v1.8.0"
	// NewIMImage is the default IM image (the upgrade's target) unless
	// Config.DefaultIMImage says otherwise; the generator pulls it everywhere.
	NewIMImage = "longhornio/longhorn-instance-manager:v1.9.0"
	// V1EngineImage is the image reported by v1 volumes, which the v2 upgrade
	// never changes.
	V1EngineImage = "longhornio/longhorn-engine:v1.8.0"
)

// Data engines a volume can use.
const (
	EngineV1 = "v1"
	EngineV2 = dataplane.DataEngineV2
)

// Config holds the knobs of a simulated cluster. The zero value is a usable
// cluster with a real clock and zero latencies.
type Config struct {
	// Clock measures every latency; nil means RealClock.
	Clock Clock
	// DefaultIMImage is the image Longhorn gives new v2 IMs; "" means NewIMImage.
	DefaultIMImage string
	// IMImage is the image of the IMs AddNode creates; "" means OldIMImage.
	IMImage string
	// TargetMoveLatency is how long a target move takes once requested.
	// Zero, like the other latencies, means "done on the next read".
	TargetMoveLatency time.Duration
	// IMStartLatency is how long a new IM takes to run after its predecessor
	// was deleted.
	IMStartLatency time.Duration
	// RebuildLatency is how long a replica rebuild takes.
	RebuildLatency time.Duration
	// ReplicaReplenishWait is how long a lost replica waits for its own node
	// to become eligible again before being rebuilt on another node, like
	// Longhorn's replica-replenishment-wait-interval. Zero rebuilds elsewhere
	// at once when the node is not eligible; negative waits forever.
	ReplicaReplenishWait time.Duration
	// Faults are armed when the simulator is created (see Arm).
	Faults []Fault
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
	ims       map[string]*im   // live IMs by name (current and stopped-but-listed)
	imGone    map[string]bool  // IMs removed after deletion: deleting again is a no-op

	vols      map[string]*volume
	volNames  []string
	volSorted bool

	// Per-node indexes keep single-object work independent of cluster size.
	targetsOn  map[string]map[string]struct{} // node → volumes whose current target is there
	attachedOn map[string]map[string]struct{} // node → volumes attached there
	replicasOn map[string]map[string]struct{} // node → volumes with a replica entry there
	hosted     map[string]int                 // node → volumes whose TargetHost is there
	attached   int

	timers timerHeap
	seq    uint64

	// Work that waits for a condition instead of a time: re-examined when an
	// eligibility event (IM running, node Ready, flag cleared, heal) happens.
	reconcile    map[string]struct{} // volumes whose replica count must be checked
	waiting      map[string]struct{} // volumes short of replicas with no eligible node yet
	pendingMoves map[string]struct{} // volumes whose due target move is blocked
	blockedIMs   map[string]struct{} // nodes whose new IM waits for the node to be Ready
	unblock      bool
	placeCursor  int

	faults  faultSet
	io      ioChecker
	actions actionLog
}

type node struct {
	name   string
	ready  bool
	v2     bool
	flag   bool
	images []string
	im     *im   // current v2 IM, nil on a node without the v2 engine
	old    []*im // stopped IMs still listed until the replacement runs
	imSeq  int
}

type im struct {
	name  string
	node  string
	image string
	state dataplane.IMState
	gen   uint64
}

type volume struct {
	name        string
	engine      string
	numReplicas int
	attached    string
	target      string
	override    string
	image       string
	replicas    []*replica
	replicaSeq  int
	gone        map[string]struct{} // deleted replica names: acting on them again is a no-op
	snapshots   []string
	slots       []slot
	move        *move
	moveGen     uint64
}

type replica struct {
	name    string
	node    string
	state   dataplane.ReplicaState
	gen     uint64
	salvage bool // rebuilt from its own data because no healthy source was left
	byFault bool // lost to an injected fault, for I/O failure attribution
}

// slot remembers where a replica was lost, so the rebuild can prefer that node.
type slot struct {
	node       string
	im         string // the IM that held the replica when it was lost
	deliberate bool   // stopped by FailReplica/DeleteReplica rather than lost
	byFault    bool
	at         time.Time
	recheck    bool // a timer re-examines the slot when its wait ends
}

type move struct {
	dest string
	gen  uint64
}

// New returns an empty cluster; add nodes and volumes with the builder
// methods. It panics if cfg.Faults holds an invalid fault, a programming error.
func New(cfg Config) *Sim {
	if cfg.Clock == nil {
		cfg.Clock = RealClock{}
	}
	if cfg.DefaultIMImage == "" {
		cfg.DefaultIMImage = NewIMImage
	}
	if cfg.IMImage == "" {
		cfg.IMImage = OldIMImage
	}
	if cfg.IOLogLimit <= 0 {
		cfg.IOLogLimit = 1000
	}
	if cfg.ActionLogLimit <= 0 {
		cfg.ActionLogLimit = 100000
	}
	s := &Sim{
		cfg:          cfg,
		clock:        cfg.Clock,
		nodes:        map[string]*node{},
		deleted:      map[string]*node{},
		ims:          map[string]*im{},
		imGone:       map[string]bool{},
		vols:         map[string]*volume{},
		volSorted:    true,
		targetsOn:    map[string]map[string]struct{}{},
		hosted:       map[string]int{},
		attachedOn:   map[string]map[string]struct{}{},
		replicasOn:   map[string]map[string]struct{}{},
		reconcile:    map[string]struct{}{},
		waiting:      map[string]struct{}{},
		pendingMoves: map[string]struct{}{},
		blockedIMs:   map[string]struct{}{},
		faults:       newFaultSet(),
		io:           newIOChecker(cfg.IOLogLimit),
		actions:      actionLog{limit: cfg.ActionLogLimit},
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

var _ dataplane.DataPlane = (*Sim)(nil)

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
	return s.cfg.DefaultIMImage, nil
}

// InstanceManagers lists the v2 IMs of node, or of every node when node is
// "", sorted by node then age. A deleted IM stays listed as stopped until its
// replacement runs. An unknown node is an error matching ErrNotFound.
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
		return n.exportIMs(nil), nil
	}
	var out []dataplane.InstanceManager
	for _, name := range s.nodeNames {
		out = s.nodes[name].exportIMs(out)
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
		out = append(out, s.vols[name].export())
	}
	return out, nil
}

// Volume returns one volume or an error matching dataplane.ErrNotFound.
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
			out = append(out, v.export())
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
	return v.export(), nil
}

// Snapshots returns the names of a volume's snapshots in creation order.
func (s *Sim) Snapshots(name string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, err := s.volume(name)
	if err != nil {
		return nil, err
	}
	return slices.Clone(v.snapshots), nil
}

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

func (n *node) export() dataplane.Node {
	return dataplane.Node{
		Name:             n.name,
		Ready:            n.ready,
		V2:               n.v2,
		UpgradeRequested: n.flag,
		Images:           slices.Clone(n.images),
	}
}

func (n *node) exportIMs(out []dataplane.InstanceManager) []dataplane.InstanceManager {
	for _, m := range n.old {
		out = append(out, m.export())
	}
	if n.im != nil {
		out = append(out, n.im.export())
	}
	return out
}

// imRunning reports whether the node's current IM serves its targets and
// replicas; an IM on a NotReady node is unreachable whatever its state.
func (n *node) imRunning() bool {
	return n.ready && n.im != nil && n.im.state == dataplane.IMRunning
}

func (m *im) export() dataplane.InstanceManager {
	return dataplane.InstanceManager{
		Name:       m.name,
		Node:       m.node,
		Image:      m.image,
		DataEngine: dataplane.DataEngineV2,
		State:      m.state,
	}
}

func (v *volume) export() dataplane.Volume {
	out := dataplane.Volume{
		Name:              v.name,
		DataEngine:        v.engine,
		NumberOfReplicas:  v.numReplicas,
		AttachedNode:      v.attached,
		TargetNode:        v.target,
		DesiredTargetNode: v.override,
		Image:             v.image,
		Robustness:        v.robustness(),
		Replicas:          make([]dataplane.Replica, len(v.replicas)),
	}
	for i, r := range v.replicas {
		out.Replicas[i] = dataplane.Replica{Name: r.name, Node: r.node, State: r.state}
	}
	return out
}

// robustness follows Longhorn: it counts running replicas against the
// desired number. Detached volumes are summarised the same way (Longhorn
// says "unknown") so that a test can wait for any volume to be whole again.
func (v *volume) robustness() dataplane.Robustness {
	running := v.count(dataplane.ReplicaRunning)
	switch {
	case running == 0:
		return dataplane.RobustnessFaulted
	case running < v.numReplicas:
		return dataplane.RobustnessDegraded
	default:
		return dataplane.RobustnessHealthy
	}
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

func addIdx(idx map[string]map[string]struct{}, key, vol string) {
	set := idx[key]
	if set == nil {
		set = map[string]struct{}{}
		idx[key] = set
	}
	set[vol] = struct{}{}
}

func delIdx(idx map[string]map[string]struct{}, key, vol string) {
	if set := idx[key]; set != nil {
		delete(set, vol)
		if len(set) == 0 {
			delete(idx, key)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// setTarget moves the volume's current target, keeping the index in step.
func (s *Sim) setTarget(v *volume, nodeName string) {
	defer s.rehost(v, v.targetHost())
	if v.target != "" {
		delIdx(s.targetsOn, v.target, v.name)
	}
	v.target = nodeName
	if nodeName != "" {
		addIdx(s.targetsOn, nodeName, v.name)
	}
	s.io.mark(v.name)
}

func (s *Sim) setAttached(v *volume, nodeName string) {
	defer s.rehost(v, v.targetHost())
	if v.attached != "" {
		delIdx(s.attachedOn, v.attached, v.name)
		s.attached--
	}
	v.attached = nodeName
	if nodeName != "" {
		addIdx(s.attachedOn, nodeName, v.name)
		s.attached++
	}
	s.io.mark(v.name)
}

// targetHost is export().TargetHost() without exporting the replicas.
func (v *volume) targetHost() string {
	return dataplane.Volume{DataEngine: v.engine, AttachedNode: v.attached, TargetNode: v.target}.TargetHost()
}

// rehost moves v's count in hosted from the node it was hosted on before a
// change (was) to where it is hosted now.
func (s *Sim) rehost(v *volume, was string) {
	now := v.targetHost()
	if now == was {
		return
	}
	if was != "" {
		if s.hosted[was]--; s.hosted[was] == 0 {
			delete(s.hosted, was)
		}
	}
	if now != "" {
		s.hosted[now]++
	}
}

// markNode flags for I/O re-evaluation every volume whose path crosses the node.
func (s *Sim) markNode(name string) {
	for _, idx := range []map[string]map[string]struct{}{s.targetsOn, s.attachedOn, s.replicasOn} {
		for vol := range idx[name] {
			s.io.mark(vol)
		}
	}
}

func (s *Sim) now() time.Time { return s.clock.Now() }
