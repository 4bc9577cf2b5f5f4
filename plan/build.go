package plan

import (
	"slices"
	"strings"

	"github.com/switchback-dev/switchback/dataplane"
)

// Plan is the whole intent of an upgrade, computed before anything happens
// (as Cluster API computes a rollout before acting): the nodes in order and,
// for each, what its upgrade will do. It is what `switchback plan` shows.
type Plan struct {
	// TargetImage is the instance-manager image every node ends on.
	TargetImage string `json:"targetImage"`
	// Platform is the Longhorn the plan was computed for.
	Platform dataplane.Platform `json:"platform"`
	// MaxConcurrentNodes is how many nodes may be upgraded at once.
	MaxConcurrentNodes int `json:"maxConcurrentNodes"`
	// Nodes are the nodes to upgrade, in order (see TargetNodes), wave
	// after wave.
	Nodes []NodePlan `json:"nodes"`
	// Waves are the nodes upgraded together, in order (see BuildWaves).
	Waves []Wave `json:"waves,omitempty"`
	// Warnings are what the plan finds costly but not blocking, with what
	// to change (a replica-replenishment-wait-interval shorter than a
	// node's time away).
	Warnings []string `json:"warnings,omitempty"`
	// Room is, under spec.replicaPolicy add-first, the space the
	// temporary replicas are expected to take per node and disk (see
	// PlaceTemporaryReplicas); none otherwise.
	Room []DiskRoom `json:"room,omitempty"`
}

// NodePlan is what one node's upgrade will do, as seen from the snapshot with
// every earlier node of the plan already upgraded.
type NodePlan struct {
	// Node is the node's name.
	Node string `json:"node"`
	// Wave is the number of the node's wave, from 1; Waited says why the
	// node could not join the wave before ("" when it is in the first it
	// could be).
	Wave   int    `json:"wave"`
	Waited string `json:"waited,omitempty"`
	// Unknown is true when the cluster has no such node; the NodesKnown
	// precheck refuses such a plan.
	Unknown bool `json:"unknown,omitempty"`
	// Image is the image the node's instance manager runs now ("" if none).
	Image string `json:"image,omitempty"`
	// Live is false when the node cannot be upgraded without cutting I/O on
	// this Longhorn (see LiveVerdict); NotLive then says why.
	Live    bool   `json:"live"`
	NotLive string `json:"notLive,omitempty"`
	// Switchovers are the attached v2 volumes whose target runs on the node,
	// by volume name, each with its temporary target.
	Switchovers []Switchover `json:"switchovers,omitempty"`
	// Replicas are the node's replicas of attached v2 volumes, which are
	// failed and rebuilt. Detached volumes' replicas run no instance and
	// are not touched.
	Replicas []ReplicaRef `json:"replicas,omitempty"`
	// SingleReplica are the attached v2 volumes that serve from a single
	// healthy replica while the node is upgraded.
	SingleReplica []string `json:"singleReplica,omitempty"`
	// Holds are what would keep the node's upgrade waiting as the cluster
	// is now (see Holds); none when its IM already runs the target image.
	Holds []Hold `json:"holds,omitempty"`
	// FullCopyBytes is what rebuilding Replicas copies as whole copies
	// (their volumes' actual size): without delta rebuilds. With them a
	// reused replica copies only what is written while the node is away,
	// once HashBytes (on each replica of the volumes no earlier node of the
	// plan holds, whose snapshots are not hashed yet) were read.
	// ExpectedBytes is what the rebuilds copy besides what is written
	// while the node is away: whole copies of the volumes that cannot
	// hash first (Longhorn reuses no failed replica, integrity disabled,
	// fewer than two healthy replicas).
	FullCopyBytes int64 `json:"fullCopyBytes,omitempty"`
	HashBytes     int64 `json:"hashBytes,omitempty"`
	ExpectedBytes int64 `json:"expectedBytes,omitempty"`
	// TemporaryReplicas are, under spec.replicaPolicy add-first, the
	// temporary replicas the node's upgrade adds and where they are
	// expected (see PlaceTemporaryReplicas); none otherwise.
	TemporaryReplicas []TemporaryReplica `json:"temporaryReplicas,omitempty"`
}

// Switchover is one attached volume whose target leaves the node while its
// instance manager is replaced, then comes back.
type Switchover struct {
	// Volume is the volume's name.
	Volume string `json:"volume"`
	// AttachedNode is where the initiator stays during the whole upgrade.
	AttachedNode string `json:"attachedNode"`
	// TemporaryTarget is the node hosting the target meanwhile; "" when OK is
	// false.
	TemporaryTarget string `json:"temporaryTarget,omitempty"`
	// OK is false when no node qualifies; the node upgrade will stall there.
	OK bool `json:"ok"`
	// Reason explains the choice, or what is missing.
	Reason string `json:"reason,omitempty"`
	// InitiatorMultipath is the attached node's nvme_core.multipath as its
	// worker reported it: with N the switch-over would leave the volume
	// without a path (OK false), unknown is taken as Y.
	InitiatorMultipath dataplane.Multipath `json:"initiatorMultipath,omitempty"`
}

// ReplicaRef names one replica of one volume.
type ReplicaRef struct {
	// Volume is the volume's name.
	Volume string `json:"volume"`
	// Replica is the replica's name.
	Replica string `json:"replica"`
}

// Order returns the node names in upgrade order: the order the manager
// records when the upgrade is planned.
func (p Plan) Order() []string {
	var out []string
	for _, n := range p.Nodes {
		out = append(out, n.Node)
	}
	return out
}

// Feasible reports whether every node exists, can be upgraded live and is
// held by nothing, every switch-over has a temporary target and every
// temporary replica a disk. A plan
// that is not feasible would stall, so the dry run says so up front.
func (p Plan) Feasible() bool {
	for _, n := range p.Nodes {
		if n.Unknown || !n.Live || len(n.Holds) > 0 {
			return false
		}
		for _, s := range n.Switchovers {
			if !s.OK {
				return false
			}
		}
		for _, t := range n.TemporaryReplicas {
			if !t.Placed() {
				return false
			}
		}
	}
	return true
}

// Build computes the plan for upgrading requested (every v2 node when empty)
// to targetImage, one node at a time.
//
// Temporary targets are chosen as if every earlier node of the plan were
// upgraded by then (its IM runs targetImage), which is
// what the cluster will look like when the node's turn comes, so the plan
// shows where targets will really go, not where they would go today. Within
// one node, each choice counts the targets already sent to a node, so the
// volumes spread instead of all landing on the same node.
//
// Only v2 volumes are included (see Concerned). Build does not modify c.
func Build(c Cluster, requested []string, targetImage string) Plan {
	return BuildWaves(c, requested, targetImage, 1)
}

// BuildWaves is Build with up to maxConcurrent nodes upgraded at once, in
// waves: two nodes share a wave only if no attached volume's Footprint
// holds both (splitWaves), and a temporary target is never a node of the
// wave being upgraded. Each wave is planned as if every earlier wave were
// upgraded. With maxConcurrent 1 it is Build.
func BuildWaves(c Cluster, requested []string, targetImage string, maxConcurrent int) Plan {
	v := newView(c)
	vols := v2Volumes(c.Volumes)
	p := Plan{TargetImage: targetImage, Platform: c.Platform, MaxConcurrentNodes: max(maxConcurrent, 1)}
	hashed := map[string]bool{}
	split := splitWaves(vols, v.order(c, requested), maxConcurrent)
	for i, w := range split.waves {
		v.fly(w.Nodes)
		for _, name := range w.Nodes {
			np := v.nodePlan(c, vols, name, targetImage, hashed)
			np.Wave, np.Waited = i+1, split.waited[name]
			p.Nodes = append(p.Nodes, np)
		}
		for _, name := range w.Nodes {
			v.upgraded(name, targetImage)
		}
	}
	p.Waves = split.waves
	if w := replenishWarning(c, p); w != "" {
		p.Warnings = append(p.Warnings, w)
	}
	return p
}

// nodePlan plans node's upgrade on the view as it stands; hashed holds the
// volumes an earlier node of the plan hashes, and gains this node's.
func (v *view) nodePlan(c Cluster, vols []dataplane.Volume, name, targetImage string, hashed map[string]bool) NodePlan {
	np := NodePlan{Node: name, Image: c.InstanceManagerImage(name)}
	_, known := c.Node(name)
	np.Unknown = !known
	np.Live, np.NotLive = LiveVerdict(c.Platform.Profile, name, vols)
	np.SingleReplica = SingleReplicaWhile(vols, name)
	if n, ok := c.Node(name); ok && np.Image != targetImage {
		np.Holds = Holds(c.Platform.Profile, n, imsOf(c.InstanceManagers, name), c.DefaultImage, targetImage)
	}
	extra := map[string]int{}
	for _, vol := range vols {
		if !Concerned(vol, name) || !vol.Attached() {
			continue
		}
		if vol.TargetHost() == name {
			node, reason, ok := "", vol.FrontendBlocker(), false
			if vol.CanSwitchTarget() {
				if reason = vol.MultipathBlocker(); reason == "" {
					node, reason, ok = v.choose(vol, name, targetImage, extra)
				}
			}
			if ok {
				extra[node]++
			}
			np.Switchovers = append(np.Switchovers, Switchover{
				Volume: vol.Name, AttachedNode: vol.AttachedNode,
				TemporaryTarget: node, OK: ok, Reason: reason, InitiatorMultipath: vol.InitiatorMultipath,
			})
		}
		for _, r := range vol.Replicas {
			if r.Node == name {
				np.Replicas = append(np.Replicas, ReplicaRef{Volume: vol.Name, Replica: r.Name})
				np.FullCopyBytes += vol.ActualSize
				if vol.NoReplicaReuse || vol.Hashing.Disabled || vol.HealthyReplicas() < 2 {
					np.ExpectedBytes += vol.ActualSize
				} else if !hashed[vol.Name] {
					np.HashBytes += vol.ActualSize
					hashed[vol.Name] = true
				}
			}
		}
	}
	return np
}

// imsOf returns node's v2 instance managers.
func imsOf(ims []dataplane.InstanceManager, node string) []dataplane.InstanceManager {
	var out []dataplane.InstanceManager
	for _, im := range ims {
		if im.Node == node && isV2IM(im) {
			out = append(out, im)
		}
	}
	return out
}

// v2Volumes returns the v2 volumes sorted by name, each with its replicas
// sorted by name, so that the plan does not depend on the snapshot's order.
// Replica slices are cloned: the snapshot is never modified.
func v2Volumes(all []dataplane.Volume) []dataplane.Volume {
	var out []dataplane.Volume
	for _, vol := range all {
		if vol.DataEngine != dataplane.DataEngineV2 {
			continue
		}
		vol.Replicas = slices.Clone(vol.Replicas)
		slices.SortStableFunc(vol.Replicas, func(a, b dataplane.Replica) int {
			return strings.Compare(a.Name, b.Name)
		})
		out = append(out, vol)
	}
	slices.SortStableFunc(out, func(a, b dataplane.Volume) int { return strings.Compare(a.Name, b.Name) })
	return out
}
