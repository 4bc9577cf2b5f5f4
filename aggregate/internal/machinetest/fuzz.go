package machinetest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/aggregate"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/test/harness/fuzzinput"
)

// maxProgram bounds a fuzz program's length.
const maxProgram = 64

// Program is what FoldProgram evolved: the events, the state after each, and
// how many applied.
type Program[S any] struct {
	History []events.Envelope
	States  []S
	Applied int
}

// FoldProgram evolves the events next generates from data's choices, one by
// one from the zero state, until data is used up or maxProgram: Evolve must leave its input alone, refuse
// only with a *TransitionError that leaves the state unchanged, and produce
// states that keep invariants and count the events applied. Then the history
// must fold as it evolved, twice alike, in two parts as at once (split where
// data's first byte says), and into states that are values; the last state
// must survive JSON (snapshots).
func FoldProgram[S any, C Command](t *testing.T, m Machine[S, C], data []byte, next func(r *fuzzinput.Choices, s S, i int) events.Envelope, invariants func(testing.TB, S)) Program[S] {
	t.Helper()
	r := fuzzinput.New(data)
	var (
		p Program[S]
		s S
	)
	for !r.Done() && len(p.History) < maxProgram {
		e := next(r, s, len(p.History))
		before := m.Clone(s)
		got, err := m.Evolve(s, e)
		require.Equal(t, before, s, "Evolve modified its input")
		if err != nil {
			require.ErrorIs(t, err, aggregate.ErrIllegalTransition)
			var te *aggregate.TransitionError
			require.ErrorAs(t, err, &te)
			require.Equal(t, s, got, "a refused event changed the state")
		} else {
			p.Applied++
		}
		s = got
		invariants(t, s)
		p.History = append(p.History, e)
		p.States = append(p.States, s)
	}
	_, n := m.Stamp(s)
	require.Equal(t, p.Applied, n)

	var zero S
	s1, err1 := m.FoldSkipping(zero, p.History...)
	s2, err2 := m.FoldSkipping(zero, p.History...)
	require.Equal(t, s, s1)
	require.Equal(t, s1, s2, "folding the same history twice differs")
	require.Equal(t, fmt.Sprint(err1), fmt.Sprint(err2))
	require.Equal(t, len(p.History)-p.Applied, countErrs(err1))

	k := 0
	if len(data) > 0 {
		k = int(data[0]) % (len(p.History) + 1)
	}
	prefix, errP := m.FoldSkipping(zero, p.History[:k]...)
	all, errR := m.FoldSkipping(prefix, p.History[k:]...)
	require.Equal(t, s1, all, "prefix then rest differs from all at once")
	require.Equal(t, countErrs(err1), countErrs(errP)+countErrs(errR))

	// States are values: re-folding each prefix still gives the state
	// recorded on the way, so no later Evolve wrote into an earlier one.
	for _, i := range []int{k, len(p.States) / 2} {
		if i < len(p.States) {
			si, _ := m.FoldSkipping(zero, p.History[:i+1]...)
			require.Equal(t, p.States[i], si)
		}
	}
	RequireJSONRoundTrip(t, s)
	return p
}

// DecideProgram decides the commands next generates from data's choices, one
// by one from the zero state, until data is used up or maxProgram: whatever Decide accepts must evolve,
// encode, keep invariants and be idempotent; whatever it refuses must be a
// typed refusal (Harness.Try).
func DecideProgram[S any, C Command](t *testing.T, m Machine[S, C], data []byte, next func(r *fuzzinput.Choices, s S, i int) C, invariants func(testing.TB, S)) {
	t.Helper()
	r := fuzzinput.New(data)
	var zero S
	h := NewHarness(t, m, zero)
	h.Invariants = invariants
	for i := 0; !r.Done() && i < maxProgram; i++ {
		_, _ = h.Try(next(r, h.S, i))
	}
}

// countErrs counts the errors a FoldSkipping joined.
func countErrs(err error) int {
	if err == nil {
		return 0
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return len(j.Unwrap())
	}
	return 1
}
