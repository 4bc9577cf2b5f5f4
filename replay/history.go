package replay

import (
	"fmt"
	"strings"
	"time"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/plan"
)

// TimeFormat is how a timeline line gives its time: date, time to the
// millisecond and zone offset.
const TimeFormat = "2006-01-02 15:04:05.000 Z07:00"

// Line is one entry of a manager's timeline.
type Line struct {
	Sequence uint64 `json:"sequence"`
	Time     string `json:"time"`
	Node     string `json:"node,omitempty"`
	What     string `json:"what"`
	Message  string `json:"message,omitempty"`
}

// Describe turns an event into a timeline line: what changed, from → to.
func Describe(e events.Envelope) Line {
	// With the date and the zone: an upgrade spans hours, and whoever reads
	// a timeline later may not be in the zone it was written in.
	l := Line{Sequence: e.Sequence, Time: e.Time.Format(TimeFormat), Node: e.Aggregate.Node}
	switch d := e.Data.(type) {
	case events.UpgradeRequested:
		nodes := "all v2 nodes"
		if len(d.Nodes) > 0 {
			nodes = strings.Join(d.Nodes, ", ")
		}
		l.What, l.Message = "upgrade requested", nodes
	case events.PrecheckPassed:
		l.What, l.Message = "precheck "+d.Check+" passed", d.Message
	case events.PrecheckFailed:
		l.What, l.Message = "precheck "+d.Check+" FAILED", d.Reason+": "+d.Message
	case events.UpgradePlanned:
		l.What, l.Message = "planned", "order "+strings.Join(d.Nodes, " → ")+", image "+d.InstanceManagerImage
		if d.LonghornProfile != "" {
			l.Message += ", Longhorn " + dataplane.Platform{Profile: dataplane.Profile(d.LonghornProfile), LonghornVersion: d.LonghornVersion}.String()
		}
	case events.NodeScheduled:
		l.Node, l.What = d.Node, "scheduled"
	case events.NodeFinished:
		l.Node, l.What, l.Message = d.Node, "finished: "+string(d.State), d.Message
	case events.UpgradeCompleted:
		l.What, l.Message = "upgrade completed", d.Message
	case events.UpgradeFailed:
		l.What, l.Message = "upgrade FAILED", d.Reason+": "+d.Message
	case events.CancelRequested:
		l.What, l.Message = "cancel requested", d.Reason
	case events.UpgradeCancelled:
		l.What, l.Message = "upgrade cancelled", d.Message
	case events.UpgradeHeld:
		l.What, l.Message = "held: no new node starts ("+d.Reason+")", d.Message
	case events.UpgradeReleased:
		l.What, l.Message = "released: the next node may start", d.Message
	case events.NodeUpgradeStarted:
		l.What, l.Message = "started", fmt.Sprintf("attempt %d, target image %s", d.Attempt, d.InstanceManagerImage)
		if d.LonghornProfile != "" {
			l.Message += ", Longhorn " + d.LonghornProfile
		}
	case events.NodeStateChanged:
		l.What, l.Message = fmt.Sprintf("%s → %s", d.From, d.To), d.Message
	case events.VolumeStateChanged:
		from := string(d.From)
		if from == "" {
			from = "recorded"
		}
		l.What, l.Message = fmt.Sprintf("volume %s: %s → %s", d.Volume, from, d.To), d.Message
		if d.From == d.To {
			l.What = fmt.Sprintf("volume %s: %s, redirected to %s", d.Volume, d.To, d.TargetNode)
		}
	case events.NodeStalled:
		l.What, l.Message = "STALLED in "+string(d.Step), d.Reason+": "+d.Message
	case events.NodeResumed:
		l.What, l.Message = "resumed "+string(d.Step), d.Message
	case events.NodeUpgradeCompleted:
		l.What, l.Message = "completed", d.Message
	case events.NodeUpgradeFailed:
		l.What, l.Message = "FAILED in "+string(d.Step), d.Reason+": "+d.Message
	case events.NodeCancelRequested:
		l.What, l.Message = "cancel requested", d.Reason
	case events.NodeUpgradeCancelled:
		l.What, l.Message = "cancelled at "+string(d.Step), d.Message
	case events.SchedulingRecorded:
		l.What, l.Message = "replica scheduling recorded", fmt.Sprintf("spec.allowScheduling was %t; off until the new instance manager runs", d.AllowScheduling)
	case events.SchedulingRestored:
		l.What, l.Message = "replica scheduling restored", fmt.Sprintf("spec.allowScheduling=%t", d.AllowScheduling)
	case events.SnapshotsTaken:
		l.What, l.Message = "snapshots taken", fmt.Sprintf("%s of %s", d.Snapshot, strings.Join(d.Volumes, ", "))
	case events.SnapshotsRemoved:
		l.What, l.Message = "snapshots removed", fmt.Sprintf("%s of %s", d.Snapshot, strings.Join(d.Volumes, ", "))
	case events.NodeTainted:
		l.What, l.Message = "node tainted", d.Key+":NoSchedule, so that the pods moved off it are not scheduled back"
	case events.NodeUntainted:
		l.What, l.Message = "node untainted", d.Key
	case events.PodMoved:
		how := "evicted"
		if d.Restart {
			how = "share-manager restarted elsewhere"
		}
		l.What, l.Message = "pod moved", fmt.Sprintf("%s %s, holding %s", d.Pod, how, strings.Join(d.Volumes, ", "))
	case events.HashingRequested:
		l.What, l.Message = "snapshot hashing requested", fmt.Sprintf("%s: %s of %s to read on each replica, until %s",
			d.Volume, plan.Bytes(d.Bytes), d.Snapshot, d.Deadline.Format(time.RFC3339))
	case events.RebuildPlanned:
		how := "hashed"
		if !d.Hashed {
			how = "not hashed: " + d.Reason + ": " + d.Message
		}
		l.What, l.Message = "rebuild planned", fmt.Sprintf("%s: %s to copy of %s (%s)", d.Volume, plan.Bytes(d.ExpectedBytes), plan.Bytes(d.FullBytes), how)
	case events.RebuildStarted:
		l.What, l.Message = "rebuild seen", fmt.Sprintf("%s: replica %s on %s at %d%%", d.Volume, d.Replica, d.Node, d.Progress)
	case events.RebuildFinished:
		l.What, l.Message = "rebuild over", d.Volume+" healthy again"
	case events.TemporaryReplicaRequested:
		l.What, l.Message = "temporary replica asked for", fmt.Sprintf("%s: numberOfReplicas %d, replicas %s, until %s",
			d.Volume, d.NumberOfReplicas, strings.Join(d.Replicas, ", "), d.Deadline.Format(time.RFC3339))
	case events.ReplicaCountRaised:
		l.What, l.Message = "replica count raised", fmt.Sprintf("%s: numberOfReplicas %d to %d (auto-balance %q, data locality %q kept to restore)",
			d.Volume, d.NumberOfReplicas, d.Raised, d.ReplicaAutoBalance, d.DataLocality)
		if d.FirstNode != "" {
			l.Message = fmt.Sprintf("%s: raised for %s already, numberOfReplicas %d", d.Volume, d.FirstNode, d.NumberOfReplicas)
		}
	case events.TemporaryReplicaAdded:
		l.What, l.Message = "temporary replica", fmt.Sprintf("%s: %s on %s", d.Volume, d.Replica, d.Node)
	case events.ReplicaCountRestored:
		l.What, l.Message = "replica count restored", fmt.Sprintf("%s: numberOfReplicas %d, %s deleted", d.Volume, d.NumberOfReplicas, d.Replica)
		if d.Replica == "" {
			l.Message = fmt.Sprintf("%s: numberOfReplicas %d; %s", d.Volume, d.NumberOfReplicas, d.Message)
		}
	default:
		l.What = string(e.Type())
	}
	return l
}

// String renders the line for a terminal.
func (l Line) String() string {
	node := l.Node
	if node == "" {
		node = "-"
	}
	s := fmt.Sprintf("%6d  %s  %-14s %s", l.Sequence, l.Time, node, l.What)
	if l.Message != "" {
		s += "  (" + oneLine(l.Message) + ")"
	}
	return s
}
