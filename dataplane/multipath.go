package dataplane

import (
	"context"
	"fmt"
)

// Multipath is whether a node's kernel keeps several NVMe paths to one
// namespace under a single block device (the nvme_core module's multipath
// parameter), as the node's worker read it. A switch-over of a blockdev
// volume adds a path to the new target beside the old one on the attached
// node, then makes the old one inaccessible: without native multipath the
// new path is a device of its own, and the volume's device is left with no
// usable path.
type Multipath string

// The readings of nvme_core.multipath.
const (
	// MultipathUnknown: not reported (no worker has read the node, or it
	// could not read the parameter).
	MultipathUnknown Multipath = ""
	// MultipathOn: nvme_core.multipath=Y.
	MultipathOn Multipath = "Y"
	// MultipathOff: nvme_core.multipath=N, or a kernel built without it.
	MultipathOff Multipath = "N"
)

// ParseMultipath reads a reported value; anything but Y or N is unknown.
func ParseMultipath(s string) Multipath {
	switch m := Multipath(s); m {
	case MultipathOn, MultipathOff:
		return m
	}
	return MultipathUnknown
}

// Show is the reading as a plan prints it: Y, N or "?".
func (m Multipath) Show() string {
	if m == MultipathUnknown {
		return "?"
	}
	return string(m)
}

// MultipathBlocker says, for an attached volume whose target must not be
// switched over because its initiator's kernel would not keep the second
// path (a blockdev frontend on a node that reported nvme_core.multipath=N),
// why and what to do; "" when nothing is known against it. An unknown
// reading does not block: the node's worker reports it when it starts.
func (v Volume) MultipathBlocker() string {
	if v.Frontend != FrontendBlockdev || v.InitiatorMultipath != MultipathOff || !v.Attached() {
		return ""
	}
	return fmt.Sprintf("volume %s is attached to %s, whose kernel does not keep two NVMe paths under one device (nvme_core.multipath is N): "+
		"a switch-over would leave the volume without a usable path; boot %s with nvme_core.multipath=Y, or detach the volume, and the upgrade goes on by itself",
		v.Name, v.AttachedNode, v.AttachedNode)
}

// HostReporter records what a node's worker reads of its host for the
// controller and `switchback plan` to see: on Longhorn, an annotation of
// the node's Longhorn node. Only a data plane with real hosts implements it.
type HostReporter interface {
	// ReportNVMeMultipath records node's nvme_core.multipath reading
	// (MultipathUnknown removes it). Recording what is recorded is a no-op.
	ReportNVMeMultipath(ctx context.Context, node string, m Multipath) error
}
