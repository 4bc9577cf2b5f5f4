package plan

import (
	"fmt"

	"github.com/switchback-dev/switchback/dataplane"
)

// Hold is what keeps a node's upgrade waiting, touching nothing, as the
// cluster is now, and what to do about it. Each lifts by itself once fixed.
type Hold struct {
	// Reason is the machine-readable word (the node's stall reason).
	Reason string `json:"reason"`
	// Message says what holds and what to do.
	Message string `json:"message"`
}

// The reasons of the holds.
const (
	// HoldNodeCordoned: the Kubernetes node is cordoned, and Longhorn
	// starts no instance-manager pod there. Switchback never uncordons it.
	HoldNodeCordoned = "NodeCordoned"
	// HoldShardsOnNode: the node's instance manager runs erasure-coded
	// shards, which Longhorn does not count before it removes the IM.
	HoldShardsOnNode = "ShardsOnNode"
	// HoldDefaultImageChanged: Longhorn's default instance-manager image is
	// not the image the upgrade targets: Longhorn would give the node an IM
	// of another image, and deleting Longhorn's own IM would only make it
	// create it again.
	HoldDefaultImageChanged = "DefaultImageChanged"
	// HoldManagerNotRolledOut: the node's longhorn-manager does not run
	// with the target image as its --instance-manager-image (its DaemonSet
	// has not rolled out there), and Longhorn creates no IM of the target
	// image on the node until it does.
	HoldManagerNotRolledOut = "ManagerNotRolledOut"
)

// Holds lists, in a fixed order, what holds the upgrade of node n (with
// its v2 instance managers ims) to targetImage on a Longhorn of profile p
// while its default instance-manager image is defaultImage ("" when not
// read): a node whose IM already runs the target image needs nothing of
// this, and the callers check that first. Where the IM is updated in place
// (p.InPlaceIM), Longhorn's node controller creates no IM, so neither its
// default image nor its manager's rollout holds anything.
func Holds(p dataplane.Profile, n dataplane.Node, ims []dataplane.InstanceManager, defaultImage, targetImage string) []Hold {
	var out []Hold
	if n.Cordoned {
		out = append(out, Hold{HoldNodeCordoned, fmt.Sprintf("node %s is cordoned (spec.unschedulable): Longhorn starts no instance-manager pod on a cordoned node, "+
			"so its instance manager is not replaced; uncordon it (Switchback never does) and the upgrade goes on by itself", n.Name)})
	}
	if !p.InPlaceIM() && defaultImage != "" && defaultImage != targetImage {
		out = append(out, Hold{HoldDefaultImageChanged, fmt.Sprintf("Longhorn's default instance-manager image is now %s, not %s, which this upgrade targets: "+
			"Longhorn would give node %s an instance manager of %s; set default-instance-manager-image back, or delete the manager and start a new upgrade",
			defaultImage, targetImage, n.Name, defaultImage)})
	}
	if !p.InPlaceIM() && n.ManagerIMImage != targetImage {
		runs := "no longhorn-manager pod runs there"
		if n.ManagerIMImage != "" {
			runs = "its longhorn-manager runs with --instance-manager-image " + n.ManagerIMImage
		}
		out = append(out, Hold{HoldManagerNotRolledOut, fmt.Sprintf("node %s: %s, and Longhorn creates an instance manager of %s there only once its manager runs with that image: "+
			"let the longhorn-manager DaemonSet roll out on the node, and the upgrade goes on by itself", n.Name, runs, targetImage)})
	}
	for _, im := range ims {
		if im.Shards > 0 && im.Image != targetImage {
			out = append(out, Hold{HoldShardsOnNode, fmt.Sprintf("instance manager %s on %s runs %d erasure-coded shard instance(s): Longhorn does not count them "+
				"before it removes an instance manager, so replacing it would lose them; move them off the node, and the upgrade goes on by itself",
				im.Name, n.Name, im.Shards)})
		}
	}
	return out
}
