package plan

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/switchback-dev/switchback/dataplane"
)

// Cluster is a snapshot of everything the prechecks and the planner look at.
// Taking one snapshot first and deciding from it alone (rather than reading as
// we go) is what makes the decisions pure, repeatable and testable.
type Cluster struct {
	// Platform is the Longhorn the snapshot was read from.
	Platform dataplane.Platform
	// Nodes are every node, v2 or not.
	Nodes []dataplane.Node
	// InstanceManagers are the v2 instance managers of every node.
	InstanceManagers []dataplane.InstanceManager
	// Volumes are every volume, v1 and v2.
	Volumes []dataplane.Volume
	// DefaultImage is the default instance-manager image: the upgrade's
	// target when it starts.
	DefaultImage string
	// TargetCounts, when not nil, stands in for Volumes in choosing
	// temporary targets (see ReadPlacement); nil means count from Volumes.
	TargetCounts map[string]int
	// Upgrader is what Longhorn's own instance-manager upgrader shows.
	Upgrader dataplane.LonghornUpgrader
	// Rebuild is Longhorn's settings on rebuilding failed replicas; nil
	// when not read, and then no node's time away is weighed against
	// them.
	Rebuild *dataplane.RebuildSettings
}

// Read takes a snapshot through r. It and ReadPlacement are the package's
// only functions with I/O; an error names the read that failed and wraps the
// reader's error.
func Read(ctx context.Context, r dataplane.Reader) (Cluster, error) {
	c, err := readNodes(ctx, r)
	if err != nil {
		return Cluster{}, err
	}
	if c.Volumes, err = r.Volumes(ctx); err != nil {
		return Cluster{}, fmt.Errorf("plan: read volumes: %w", err)
	}
	if c.DefaultImage, err = r.DefaultInstanceManagerImage(ctx); err != nil {
		return Cluster{}, fmt.Errorf("plan: read default instance-manager image: %w", err)
	}
	if c.Upgrader, err = r.LonghornUpgrader(ctx); err != nil {
		return Cluster{}, fmt.Errorf("plan: read Longhorn's own upgrader: %w", err)
	}
	rs, err := r.RebuildSettings(ctx)
	if err != nil {
		return Cluster{}, fmt.Errorf("plan: read Longhorn's rebuild settings: %w", err)
	}
	c.Rebuild = &rs
	disks, err := r.Disks(ctx)
	if err != nil {
		return Cluster{}, fmt.Errorf("plan: read disks: %w", err)
	}
	for i := range c.Nodes {
		c.Nodes[i].Disks = disks[c.Nodes[i].Name]
	}
	return c, nil
}

// ReadPlacement takes the part of a snapshot a Chooser needs: nodes, IMs and
// the reader's target counts, not every volume. A worker switching one node
// over calls it once per node, so listing the whole cluster there would make
// an upgrade quadratic in the cluster's size.
func ReadPlacement(ctx context.Context, r dataplane.Reader) (Cluster, error) {
	c, err := readNodes(ctx, r)
	if err != nil {
		return Cluster{}, err
	}
	if c.TargetCounts, err = r.TargetCounts(ctx); err != nil {
		return Cluster{}, fmt.Errorf("plan: read target counts: %w", err)
	}
	if c.TargetCounts == nil {
		c.TargetCounts = map[string]int{}
	}
	return c, nil
}

// readNodes reads what every snapshot holds: the platform, the nodes and
// their IMs.
func readNodes(ctx context.Context, r dataplane.Reader) (Cluster, error) {
	platform, err := r.Platform(ctx)
	if err != nil {
		return Cluster{}, fmt.Errorf("plan: read platform: %w", err)
	}
	nodes, err := r.Nodes(ctx)
	if err != nil {
		return Cluster{}, fmt.Errorf("plan: read nodes: %w", err)
	}
	ims, err := r.InstanceManagers(ctx, "")
	if err != nil {
		return Cluster{}, fmt.Errorf("plan: read instance managers: %w", err)
	}
	return Cluster{Platform: platform, Nodes: nodes, InstanceManagers: ims}, nil
}

// Node returns the named node; ok is false when the cluster has no such node.
func (c Cluster) Node(name string) (n dataplane.Node, ok bool) {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return dataplane.Node{}, false
}

// V2Nodes returns the names of the nodes running the v2 data engine, sorted
// and without duplicates.
func (c Cluster) V2Nodes() []string {
	var out []string
	for _, n := range c.Nodes {
		if n.V2 {
			out = append(out, n.Name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// InstanceManagerImage returns the image of the node's v2 instance manager:
// the image of its running IM, or, when none runs, of whatever IM it has
// that is not stopped (a crashed IM is restarted with the image it had, so
// the node is still on that version; a stopped one is being replaced by it),
// or, failing that, of a stopped one. Several distinct images are joined with "+", sorted, so that a
// node caught between two IMs never looks like it runs either one alone. It
// is "" when the node has no v2 IM at all.
func (c Cluster) InstanceManagerImage(node string) string {
	imgs := imagesOf(c.InstanceManagers, node, func(im dataplane.InstanceManager) bool { return im.State == dataplane.IMRunning })
	if len(imgs) == 0 {
		imgs = imagesOf(c.InstanceManagers, node, func(im dataplane.InstanceManager) bool { return im.State != dataplane.IMStopped })
	}
	if len(imgs) == 0 {
		imgs = imagesOf(c.InstanceManagers, node, func(dataplane.InstanceManager) bool { return true })
	}
	return strings.Join(imgs, "+")
}

// Concerned reports whether node's upgrade concerns vol: a v2 volume with its
// target or one of its replicas on the node. Nothing else is touched or
// waited on by a node upgrade.
func Concerned(vol dataplane.Volume, node string) bool {
	if vol.DataEngine != dataplane.DataEngineV2 || node == "" {
		return false
	}
	if vol.TargetHost() == node {
		return true
	}
	return slices.ContainsFunc(vol.Replicas, func(r dataplane.Replica) bool { return r.Node == node })
}

// isV2IM reports whether im belongs to the v2 engine. The Reader only lists v2
// IMs; an IM that says otherwise is ignored, and one that says nothing is
// taken at the Reader's word.
func isV2IM(im dataplane.InstanceManager) bool {
	return im.DataEngine == "" || im.DataEngine == dataplane.DataEngineV2
}

// imagesOf returns the sorted distinct images of node's v2 IMs that keep
// accepts.
func imagesOf(ims []dataplane.InstanceManager, node string, keep func(dataplane.InstanceManager) bool) []string {
	var out []string
	for _, im := range ims {
		if im.Node != node || !isV2IM(im) || !keep(im) {
			continue
		}
		out = append(out, im.Image)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
