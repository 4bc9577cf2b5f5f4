package machinetest

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/aggregate"
	"github.com/switchback-dev/switchback/events"
)

// Fixture is a named state reached by a legal history.
type Fixture struct {
	Name    string
	History []events.Event
}

// Fixtures converts a machine's own fixture type, defined on Fixture so that
// its tables may be written positionally, to Fixtures.
func Fixtures[F ~struct {
	Name    string
	History []events.Event
}](fs []F) []Fixture {
	out := make([]Fixture, len(fs))
	for i, f := range fs {
		out[i] = Fixture(f)
	}
	return out
}

// Outcome is what a command must decide: event types, none, or a refusal.
type Outcome struct {
	Types []events.Type
	// Err is a kind for errors.Is, ErrIllegalCommand when no finer kind.
	Err error
}

// Emits is the outcome of a command that decides events of types ts.
func Emits(ts ...events.Type) Outcome { return Outcome{Types: ts} }

// The outcomes both machines' matrices expect: nothing decided, or a
// refusal, of a finer kind or none.
var (
	None     = Outcome{}
	Refused  = Outcome{Err: aggregate.ErrIllegalCommand}
	Conflict = Outcome{Err: aggregate.ErrConflict}
	NotFound = Outcome{Err: aggregate.ErrNotFound}
)

// DecideMatrix runs every command kind commands gives on every fixture's
// state and checks the outcome want expects: an accepted command must then
// keep the harness's contract (Harness.Do), a refused one be a typed refusal
// that names the state.
func DecideMatrix[S any, C Command](t *testing.T, m Machine[S, C], fixtures []Fixture, commands func(S) map[string]C, want map[string]map[string]Outcome) {
	for _, f := range fixtures {
		s := m.FoldPayloads(t, f.History...)
		outcomes, ok := want[f.Name]
		require.True(t, ok, "fixture %s missing from matrix", f.Name)
		cmds := commands(s)
		require.Len(t, outcomes, len(cmds), "fixture %s: every command kind needs an expectation", f.Name)
		for kind, cmd := range cmds {
			t.Run(f.Name+"/"+kind, func(t *testing.T) {
				exp, ok := outcomes[kind]
				require.True(t, ok)
				before := m.Clone(s)
				evs, err := m.Decide(s, cmd)
				require.Equal(t, before, s, "Decide modified its input")
				if exp.Err != nil {
					RequireCommandError(t, err, m.Name, exp.Err)
					require.Nil(t, evs)
					require.Contains(t, err.Error(), m.StateName(s))
					return
				}
				require.NoError(t, err)
				require.Equal(t, exp.Types, Types(evs))
				// Deciding then evolving must always succeed, and the
				// same command is then a no-op.
				NewHarness(t, m, s).Do(cmd)
			})
		}
	}
}

// CommandRefusal is a command Decide must refuse on the state History leads
// to, with a finer Kind (nil: none) and a Reason the error contains.
type CommandRefusal[C any] struct {
	Name    string
	History []events.Event
	Cmd     C
	Kind    error
	Reason  string
}

// DecideRefusals checks each case's refusal; the error of a refusal on an
// aggregate that exists must name it as aggregate.
func DecideRefusals[S any, C Command](t *testing.T, m Machine[S, C], aggregateName string, cases []CommandRefusal[C]) {
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			s := m.FoldPayloads(t, tc.History...)
			evs, err := m.Decide(s, tc.Cmd)
			require.Nil(t, evs)
			if any(tc.Cmd) == nil {
				require.ErrorIs(t, err, aggregate.ErrIllegalCommand)
			} else {
				RequireCommandError(t, err, m.Name, tc.Kind)
			}
			require.Contains(t, err.Error(), tc.Reason)
			if m.StateName(s) != aggregate.Absent {
				require.Contains(t, err.Error(), aggregateName, "error must name the aggregate")
			}
		})
	}
}

// EvolveMatrix offers every event kind canonical gives, stamped at, to every
// fixture's state: a kind legal lists for the fixture must apply and stamp
// the state, any other be refused with the state unchanged. accepted, when
// set, checks more of an applied event (from s to got).
func EvolveMatrix[S any, C Command](t *testing.T, m Machine[S, C], fixtures []Fixture, canonical func(S) map[string]events.Event,
	legal map[string][]string, wrap func(at time.Time, d events.Event) events.Envelope, accepted func(t *testing.T, kind string, s, got S),
) {
	at := m.Start.Add(time.Hour)
	for _, f := range fixtures {
		s := m.FoldPayloads(t, f.History...)
		allowed, ok := legal[f.Name]
		require.True(t, ok, "fixture %s missing from matrix", f.Name)
		for kind, data := range canonical(s) {
			t.Run(f.Name+"/"+kind, func(t *testing.T) {
				before := m.Clone(s)
				got, err := m.Evolve(s, wrap(at, data))
				require.Equal(t, before, s, "Evolve modified its input")
				if !slices.Contains(allowed, kind) {
					RequireTransitionError(t, err, m.Name, m.StateName(s), data.EventType())
					require.Equal(t, s, got, "a refused event must leave the state unchanged")
					return
				}
				require.NoError(t, err)
				_, n := m.Stamp(s)
				gotAt, gotN := m.Stamp(got)
				require.Equal(t, n+1, gotN)
				require.Equal(t, at, gotAt)
				if accepted != nil {
					accepted(t, kind, s, got)
				}
			})
		}
	}
}

// EventRefusal is an event Evolve must refuse on the state History leads to,
// for a Reason the error contains.
type EventRefusal struct {
	Name    string
	History []events.Event
	Env     events.Envelope
	Reason  string
}

// EvolveRefusals checks each case's refusal, and that it leaves the state
// unchanged.
func EvolveRefusals[S any, C Command](t *testing.T, m Machine[S, C], cases []EventRefusal) {
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			s := m.FoldPayloads(t, tc.History...)
			got, err := m.Evolve(s, tc.Env)
			var typ events.Type
			if tc.Env.Data != nil {
				typ = tc.Env.Type()
			}
			RequireTransitionError(t, err, m.Name, m.StateName(s), typ)
			require.Contains(t, err.Error(), tc.Reason)
			require.Equal(t, s, got)
		})
	}
}

// DecisionsCompleteTheirPrefix runs CompletesPrefix for every command kind
// commands gives in every fixture.
func DecisionsCompleteTheirPrefix[S any, C Command](t *testing.T, m Machine[S, C], fixtures []Fixture, commands func(S) map[string]C) {
	for _, f := range fixtures {
		s := m.FoldPayloads(t, f.History...)
		for name, cmd := range commands(s) {
			t.Run(f.Name+"/"+name, func(t *testing.T) { CompletesPrefix(t, m, s, cmd) })
		}
	}
}
