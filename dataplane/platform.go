package dataplane

import (
	"fmt"
	"slices"
)

// Profile names the Longhorn API a data plane drives: how a target is moved
// off a node, where initiators live, and how an instance manager (IM) gets
// its new image. The profile decides what a node step may do, so it is
// found out from the cluster itself (never guessed) and recorded in the
// upgrade's history. longhorn/README.md holds the version matrix.
type Profile string

// Profiles.
const (
	// ProfileV112 is released Longhorn v1.12: a v2 volume's target (engine)
	// moves with spec.engineNodeID while its initiator (the EngineFrontend)
	// stays in the IM of the node it is attached to; Longhorn replaces a
	// node's old-image IM with one of the default image once it runs no
	// instance. A node holding initiators of attached v2 volumes therefore
	// cannot get a new IM without faulting them.
	ProfileV112 Profile = "v1.12"
	// ProfileInPlace is a Longhorn whose IM controller updates a running
	// IM's image in place when spec.image changes, the kernel initiators of
	// attached volumes surviving the container restart. Experimental: no
	// release carrying it has been read, so it runs only when the operator
	// opts in.
	ProfileInPlace Profile = "in-place"
)

// Profiles lists every profile, in a fixed order.
var Profiles = []Profile{ProfileV112, ProfileInPlace}

// ProfileNames are the Profiles' names, in their order: the values of a
// flag that takes a profile.
func ProfileNames() []string {
	names := make([]string, len(Profiles))
	for i, p := range Profiles {
		names[i] = string(p)
	}
	return names
}

// Valid reports whether p is a known profile.
func (p Profile) Valid() bool { return slices.Contains(Profiles, p) }

// InitiatorsSurviveIM reports whether the initiators of volumes attached to
// a node keep serving while that node's IM is replaced. When false, a node
// with attached v2 volumes is never cut: its upgrade waits until they are
// detached or moved.
func (p Profile) InitiatorsSurviveIM() bool { return p == ProfileInPlace }

// InPlaceIM reports whether the upgrade sets the IM's image itself (the IM
// keeps its name and restarts). When false, Longhorn replaces an old-image
// IM by a new IM object once the old one runs nothing.
func (p Profile) InPlaceIM() bool { return p == ProfileInPlace }

// Experimental reports whether the profile's physics is not established on
// a released Longhorn, so running it needs the operator's opt-in.
func (p Profile) Experimental() bool { return p == ProfileInPlace }

// Platform is what a data plane found out about the Longhorn it drives.
type Platform struct {
	Profile Profile `json:"profile"`
	// LonghornVersion is the current-longhorn-version setting, "" when
	// the cluster does not report one.
	LonghornVersion string `json:"longhornVersion,omitempty"`
	// Evidence says what the profile was told by: served resources and
	// schema fields, or that a simulator was configured with it.
	Evidence string `json:"evidence,omitempty"`
}

// String renders "v1.12 (Longhorn v1.12.1)".
func (p Platform) String() string {
	if p.LonghornVersion == "" {
		return string(p.Profile)
	}
	return fmt.Sprintf("%s (Longhorn %s)", p.Profile, p.LonghornVersion)
}
