// Package machinetest holds the test harness the state machines' tests share:
// a command harness, the decide and evolve table runners, the golden replay,
// the fuzz drivers and property checks. What each test checks of a machine's
// own rules stays in the machine's package; this package runs it the same
// way for both.
package machinetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/test/harness/fuzzinput"
)

// Command is what the harness needs of a machine's commands.
type Command interface {
	CommandID() string
	CommandTime() time.Time
}

// Machine is what the checks need of a state machine.
type Machine[S any, C Command] struct {
	// Name is the machine's name in its errors.
	Name   string
	Decide func(S, C) ([]events.Event, error)
	Evolve func(S, events.Envelope) (S, error)
	// FoldSkipping applies stored events to a state, skipping those
	// refused (the aggregate's FoldSkipping).
	FoldSkipping func(S, ...events.Envelope) (S, error)
	// Wrap turns payloads into the machine's envelopes (aggregate, time).
	Wrap func(...events.Event) []events.Envelope
	// Clone deep-copies a state, to prove that Decide and Evolve leave
	// their input alone.
	Clone func(S) S
	// StateName names a state as the machine's errors do.
	StateName func(S) string
	// Stamp returns what Evolve stamps on a state: when it last changed and
	// how many events led to it.
	Stamp func(S) (time.Time, int)
	// Address is the aggregate cmd's events go to on s and the source that
	// issues cmd.
	Address func(s S, cmd C) (events.AggregateID, string)
	// Start is the time of the first command a harness stamps.
	Start time.Time
}

// FoldPayloads folds payloads, wrapped, from the zero state and fails the
// test on any refusal.
func (m Machine[S, C]) FoldPayloads(t testing.TB, data ...events.Event) S {
	t.Helper()
	var zero S
	s, err := m.FoldSkipping(zero, m.Wrap(data...)...)
	require.NoError(t, err)
	return s
}

// FuzzCommandStamp returns the id and time of a fuzz program's i-th command:
// "cmd-<i>", but now and then none (which Decide must refuse), at m.Start
// plus i minutes.
func (m Machine[S, C]) FuzzCommandStamp(r *fuzzinput.Choices, i int) (string, time.Time) {
	id := fmt.Sprintf("cmd-%d", i)
	if r.Pick(32) == 0 {
		id = ""
	}
	return id, m.Start.Add(time.Duration(i) * time.Minute)
}

// Envelopes wraps payloads in envelopes on id from source, one second apart
// from start: what the machines' tests use as Machine.Wrap.
func Envelopes(id events.AggregateID, source string, start time.Time, data ...events.Event) []events.Envelope {
	out := make([]events.Envelope, len(data))
	for i, d := range data {
		out[i] = events.New(id, source, "cmd-test", start.Add(time.Duration(i)*time.Second), d)[0]
	}
	return out
}

// Types lists the event types of evs (nil for none), for compact
// expectations.
func Types(evs []events.Event) []events.Type {
	if len(evs) == 0 {
		return nil
	}
	out := make([]events.Type, len(evs))
	for i, e := range evs {
		out[i] = e.EventType()
	}
	return out
}
