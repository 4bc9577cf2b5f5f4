package nodeupgrade

import "github.com/switchback-dev/switchback/events"

// Folder folds one node upgrade's history the way Evolve does, but owns its
// state: a volume change writes into the state's map instead of copying it,
// which is most of the cost of replaying a long stream (a node's volume map
// would otherwise be copied once per volume event). The copy happens only
// when a state has escaped: after State, the next change copies the map
// first, so every state State returned stays a value, as Evolve's do.
type Folder struct {
	s      State
	shared bool // s.Volumes is referenced by a state handed out (or given)
}

// NewFolder starts a fold from s (State{} for a node with no history). s's
// map is never written into: it belongs to the caller.
func NewFolder(s State) *Folder { return &Folder{s: s, shared: true} }

// Apply folds e. A refused event leaves the state unchanged and returns
// Evolve's *TransitionError.
func (f *Folder) Apply(e events.Envelope) error {
	if err := evolve(&f.s, e, !f.shared); err != nil {
		return err
	}
	if _, ok := e.Data.(events.VolumeStateChanged); ok {
		// The map is a fresh copy now, or was already ours.
		f.shared = false
	}
	return nil
}

// State returns the folded state. It is a value: later Apply calls do not
// change it.
func (f *Folder) State() State {
	f.shared = true
	return f.s
}

// Current returns the folded state without handing it out: its volume map
// stays the Folder's, and the next Apply may write into it. For an owner
// that replaces what it read at every Apply (upgrade.NewOwned).
func (f *Folder) Current() State { return f.s }

// FoldStopping applies evs to s in order, as Evolve would one by one but copying
// the volume map at most once; unlike FoldSkipping, which skips a refused event, it
// stops at the first event that does not apply and returns its
// *TransitionError with the state before it. s is not changed.
func FoldStopping(s State, evs []events.Envelope) (State, error) {
	f := NewFolder(s)
	for _, e := range evs {
		if err := f.Apply(e); err != nil {
			return f.State(), err
		}
	}
	return f.State(), nil
}
