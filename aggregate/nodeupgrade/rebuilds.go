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
}

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
// events.RebuildStarted and events.RebuildFinished. Each is recorded once
// per volume, the first counting; a repeat changes nothing, and an event
// of a volume the node did not record is refused.
type RecordRebuilds struct {
	aggregate.Meta
	Events []events.Event
}

func (RecordRebuilds) commandName() string { return "RecordRebuilds" }

// rebuildVolume is the volume a rebuild event is about, "" for another
// event.
func rebuildVolume(e events.Event) string {
	switch d := e.(type) {
	case events.HashingRequested:
		return d.Volume
	case events.RebuildPlanned:
		return d.Volume
	case events.RebuildStarted:
		return d.Volume
	case events.RebuildFinished:
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
	return false
}

func decideRebuilds(s State, c RecordRebuilds) ([]events.Event, error) {
	var out []events.Event
	seen := map[string]Rebuild{}
	for _, e := range c.Events {
		volume := rebuildVolume(e)
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
	volume := rebuildVolume(e.Data)
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
	}
	rebuilds := maps.Clone(s.Rebuilds)
	if rebuilds == nil {
		rebuilds = map[string]Rebuild{}
	}
	rebuilds[volume] = r
	s.Rebuilds = rebuilds
	return nil
}
