package nodeupgrade

import (
	"maps"
	"time"

	"github.com/switchback-dev/switchback/aggregate"
	"github.com/switchback-dev/switchback/events"
)

// Rebuild is what the node upgrade recorded of one volume's rebuild: the
// hashing asked for its snapshots, what it was expected to copy, and the
// rebuild as Longhorn reported it.
type Rebuild struct {
	// Hashing is the hashing request, nil when none was made.
	Hashing *events.HashingRequested `json:"hashing,omitempty"`
	// Planned is what the rebuild was expected to copy, nil until decided:
	// the volume's replica on the node is failed only once it is.
	Planned *events.RebuildPlanned `json:"planned,omitempty"`
	// Started and Finished are the rebuild as seen, nil until then.
	Started  *events.RebuildStarted  `json:"started,omitempty"`
	Finished *events.RebuildFinished `json:"finished,omitempty"`
	// Temporary is the temporary replica added first under
	// spec.replicaPolicy add-first, nil when none was asked for.
	Temporary *Temporary `json:"temporary,omitempty"`
}

// Temporary is what the node upgrade recorded of a volume's temporary
// replica: the worker's request, the controller's raise (with the spec to
// restore), the replica Longhorn built, and the restore.
type Temporary struct {
	Requested *events.TemporaryReplicaRequested `json:"requested,omitempty"`
	Raised    *events.ReplicaCountRaised        `json:"raised,omitempty"`
	Added     *events.TemporaryReplicaAdded     `json:"added,omitempty"`
	Restored  *events.ReplicaCountRestored      `json:"restored,omitempty"`
}

// Owns reports whether this node's history holds the volume's raise
// itself (not an earlier node's): its restore is recorded here.
func (t *Temporary) Owns() bool { return t != nil && t.Raised != nil && t.Raised.FirstNode == "" }

// Duration is how long the rebuild was seen under way: from its first
// sighting to the volume healthy again (zero unless both were recorded).
func (r Rebuild) Duration() time.Duration {
	if r.Started == nil || r.Finished == nil {
		return 0
	}
	return r.Finished.At.Sub(r.Started.At)
}

// RecordRebuilds records, as one decision, what the node's steps saw and
// decided of the rebuilds of its volumes: each event one of
// events.HashingRequested (before the controller asks for the hashing),
// events.RebuildPlanned (before the volume's replica is failed),
// events.RebuildStarted and events.RebuildFinished; and of a temporary
// replica (spec.replicaPolicy add-first): events.TemporaryReplicaRequested
// and events.TemporaryReplicaAdded (the worker's), events.ReplicaCountRaised
// and events.ReplicaCountRestored (the controller's). Each is recorded once
// per volume, the first counting; a repeat changes nothing, and an event
// of a volume the node did not record is refused.
type RecordRebuilds struct {
	aggregate.Meta
	Events []events.Event
}

func (RecordRebuilds) commandName() string { return "RecordRebuilds" }

// RebuildVolume is the volume a rebuild event (RecordRebuilds' kinds) is
// about, "" for another event.
func RebuildVolume(e events.Event) string {
	switch d := e.(type) {
	case events.HashingRequested:
		return d.Volume
	case events.RebuildPlanned:
		return d.Volume
	case events.RebuildStarted:
		return d.Volume
	case events.RebuildFinished:
		return d.Volume
	case events.TemporaryReplicaRequested:
		return d.Volume
	case events.ReplicaCountRaised:
		return d.Volume
	case events.TemporaryReplicaAdded:
		return d.Volume
	case events.ReplicaCountRestored:
		return d.Volume
	}
	return ""
}

// recorded reports whether r holds the kind of e already.
func (r Rebuild) recorded(e events.Event) bool {
	switch e.(type) {
	case events.HashingRequested:
		return r.Hashing != nil
	case events.RebuildPlanned:
		return r.Planned != nil
	case events.RebuildStarted:
		return r.Started != nil
	case events.RebuildFinished:
		return r.Finished != nil
	}
	t := r.Temporary
	if t == nil {
		return false
	}
	switch e.(type) {
	case events.TemporaryReplicaRequested:
		return t.Requested != nil
	case events.ReplicaCountRaised:
		return t.Raised != nil
	case events.TemporaryReplicaAdded:
		return t.Added != nil
	case events.ReplicaCountRestored:
		return t.Restored != nil
	}
	return false
}

func decideRebuilds(s State, c RecordRebuilds) ([]events.Event, error) {
	var out []events.Event
	seen := map[string]Rebuild{}
	for _, e := range c.Events {
		volume := RebuildVolume(e)
		if volume == "" {
			return nil, refuse(s, c, nil, "%T is not a rebuild event", e)
		}
		if _, ok := s.Volumes[volume]; !ok {
			return nil, refuse(s, c, nil, "volume %q is not recorded on the node", volume)
		}
		if err := events.Validate(e); err != nil {
			return nil, refuse(s, c, nil, "volume %s: %v", volume, err)
		}
		r, ok := seen[volume]
		if !ok {
			r = s.Rebuilds[volume]
		}
		if r.recorded(e) {
			continue
		}
		next := State{Volumes: s.Volumes, Rebuilds: map[string]Rebuild{volume: r}}
		if err := applyRebuild(&next, events.Envelope{Data: e}); err != nil {
			return nil, refuse(s, c, err, "volume %s: does not apply", volume)
		}
		seen[volume] = next.Rebuilds[volume]
		out = append(out, e)
	}
	return out, nil
}

// applyRebuild folds one of the rebuild events into s. The map is copied:
// states share it otherwise.
func applyRebuild(s *State, e events.Envelope) error {
	volume := RebuildVolume(e.Data)
	if _, ok := s.Volumes[volume]; !ok {
		return illegal(s, e, "volume %q is not recorded on the node", volume)
	}
	r := s.Rebuilds[volume]
	switch d := e.Data.(type) {
	case events.HashingRequested:
		if r.Hashing != nil {
			return illegal(s, e, "volume %s: hashing was already requested", volume)
		}
		r.Hashing = &d
	case events.RebuildPlanned:
		if r.Planned != nil {
			return illegal(s, e, "volume %s: its rebuild was already planned", volume)
		}
		r.Planned = &d
	case events.RebuildStarted:
		if r.Started != nil {
			return illegal(s, e, "volume %s: its rebuild was already seen started", volume)
		}
		r.Started = &d
	case events.RebuildFinished:
		if r.Finished != nil {
			return illegal(s, e, "volume %s: its rebuild was already seen finished", volume)
		}
		r.Finished = &d
	case events.TemporaryReplicaRequested, events.ReplicaCountRaised, events.TemporaryReplicaAdded, events.ReplicaCountRestored:
		t, err := applyTemporary(s, e, r.Temporary)
		if err != nil {
			return err
		}
		r.Temporary = t
	}
	rebuilds := maps.Clone(s.Rebuilds)
	if rebuilds == nil {
		rebuilds = map[string]Rebuild{}
	}
	rebuilds[volume] = r
	s.Rebuilds = rebuilds
	return nil
}

// applyTemporary folds one of the temporary replica's events into a copy
// of t, in their order: requested, raised, added, restored (a restore may
// follow the raise alone: no replica was built).
func applyTemporary(s *State, e events.Envelope, t *Temporary) (*Temporary, error) {
	volume := RebuildVolume(e.Data)
	next := Temporary{}
	if t != nil {
		next = *t
	}
	switch d := e.Data.(type) {
	case events.TemporaryReplicaRequested:
		if next.Requested != nil {
			return nil, illegal(s, e, "volume %s: a temporary replica was already requested", volume)
		}
		next.Requested = &d
	case events.ReplicaCountRaised:
		if next.Requested == nil || next.Raised != nil {
			return nil, illegal(s, e, "volume %s: a raise follows one request", volume)
		}
		next.Raised = &d
	case events.TemporaryReplicaAdded:
		if !next.Owns() || next.Added != nil {
			return nil, illegal(s, e, "volume %s: a temporary replica is added once, after the raise this node made", volume)
		}
		next.Added = &d
	case events.ReplicaCountRestored:
		if !next.Owns() || next.Restored != nil {
			return nil, illegal(s, e, "volume %s: a restore follows the raise this node made, once", volume)
		}
		next.Restored = &d
	}
	return &next, nil
}
