package nodeworker

import (
	"slices"
	"strings"
	"time"

	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/plan"
)

// A node step runs in three parts: gather (observe.go) reads what the step
// needs of the cluster into an observation; decide (steps.go, cancel.go), a
// pure function of the observation and the node's state, returns a
// stepPlan; apply (apply.go) carries the plan out. Only decide knows the
// rules, so the order of data-plane calls that keeps I/O safe is read, and
// tested, in one place.

// observation is what one round of a step saw of the cluster.
type observation struct {
	profile dataplane.Profile
	// node is the upgrading node; found is false once it left the cluster.
	node  dataplane.Node
	found bool
	// ims are the node's v2 instance managers.
	ims []dataplane.InstanceManager
	// on are the volumes the node holds something of, live (VolumesOn).
	on []dataplane.Volume
	// recorded are the volumes the node upgrade recorded, live, by name;
	// volumes deleted since are absent.
	recorded map[string]dataplane.Volume
	// placement is the cluster as a temporary-target chooser needs it; read
	// only when a target must move (see needsPlacement).
	placement *plan.Cluster
	// workloads are the pods and volumes around the node; read only when
	// its upgrade moves them (see needsWorkloads).
	workloads *dataplane.Workloads
	// snapshots are the snapshot chains of the recorded volumes whose
	// replica on the node is about to be failed (needsRebuildPlan), by
	// volume.
	snapshots map[string][]dataplane.Snapshot
	// defaultImage is Longhorn's default instance-manager image now, read
	// by the steps that may delete an IM (or touch anything first).
	defaultImage string
	// now is when the observation was made.
	now time.Time
}

// settings are the worker's own inputs to a decision.
type settings struct {
	node string
	// image is the upgrade's target instance-manager image.
	image string
	// snapshot names the upgrade's snapshots of this node's volumes.
	snapshot string
	// idPrefix starts the ids of the commands a plan records (run.id).
	idPrefix string
	// hashRate and hashFloor budget the wait for a volume's snapshots to
	// be hashed (plan.WaitBudget).
	hashRate  int64
	hashFloor time.Duration
	// copyRate budgets, with hashFloor, the wait for a temporary replica.
	copyRate int64
}

// id names one kind of recording decision; the executor makes it unique
// per aggregate version.
func (c settings) id(what string) string { return c.idPrefix + what }

// stepPlan is what one round of a step decided.
type stepPlan struct {
	// record are appended to the node's history before anything else, so a
	// crash after acting never loses what must be restored.
	record []nodeupgrade.Command
	// rebuilds are what the step saw and decided of its volumes' rebuilds
	// (nodeupgrade.RecordRebuilds), recorded together after record, also
	// before acting (a replica is failed only once its rebuild is planned).
	rebuilds []events.Event
	// volumes are the volume transitions to record, also before acting (a
	// switch-over's destination is known before it is asked for).
	volumes []nodeupgrade.SetVolumeState
	// actions are the data-plane calls, in order.
	actions []dataplane.Action
	// confirm are appended once every action succeeded.
	confirm []nodeupgrade.Command
	// done: the step's goal holds once the plan is carried out.
	done bool
	// block says what the step waits for, when not done; fatal ends the node
	// upgrade in error.
	block, fatal *block
}

func (p *stepPlan) act(call dataplane.Call, object, arg string) {
	p.actions = append(p.actions, dataplane.Action{Call: call, Object: object, Arg: arg})
}

func (p *stepPlan) setScheduling(node string, allow bool) {
	p.actions = append(p.actions, dataplane.Action{Call: dataplane.CallSetReplicaScheduling, Object: node, Allow: allow})
}

func (p *stepPlan) volume(name string, to events.VolumeState, target, message string) {
	p.volumes = append(p.volumes, nodeupgrade.SetVolumeState{Volume: name, To: to, TargetNode: target, Message: message})
}

// wait records what blocks the step; the first block found is kept, so the
// message names the first volume in name order.
func (p *stepPlan) wait(b *block) {
	p.done = false
	if p.block == nil {
		p.block = b
	}
}

// sortedRecorded returns the recorded volumes' live state in name order.
func (o observation) sortedRecorded() []dataplane.Volume {
	out := make([]dataplane.Volume, 0, len(o.recorded))
	for _, v := range o.recorded {
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b dataplane.Volume) int { return strings.Compare(a.Name, b.Name) })
	return out
}
