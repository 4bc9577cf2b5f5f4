package nodeupgrade

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/aggregate"
	"github.com/switchback-dev/switchback/events"
)

func TestDecideSetVolumeStates(t *testing.T) {
	base := fold(t, upTo(events.NodeSwitchingOver)...)
	change := func(vol string, to events.VolumeState, target string) SetVolumeState {
		return SetVolumeState{Volume: vol, To: to, TargetNode: target}
	}
	cases := []struct {
		name    string
		changes []SetVolumeState
		want    []events.Event
		refused bool
		// once: the batch moves a volume more than one step, so it cannot
		// be re-decided on its own result (the first step is then illegal).
		once bool
	}{
		{"several volumes in order", []SetVolumeState{change("v1", events.VolumePending, "node-1"), change("v2", events.VolumePending, "node-1")},
			[]events.Event{evVolume("v1", "", events.VolumePending, "node-1"), evVolume("v2", "", events.VolumePending, "node-1")}, false, false},
		{"one volume through several states", []SetVolumeState{change("v1", events.VolumePending, ""), change("v1", events.VolumeSwitchingOver, "n2"), change("v1", events.VolumeSwitchedOver, "n2")},
			[]events.Event{evVolume("v1", "", events.VolumePending, ""), evVolume("v1", events.VolumePending, events.VolumeSwitchingOver, "n2"), evVolume("v1", events.VolumeSwitchingOver, events.VolumeSwitchedOver, "n2")}, false, true},
		{"an illegal change refuses the whole batch", []SetVolumeState{change("v1", events.VolumePending, ""), change("v2", events.VolumeSwitchedBack, "")}, nil, true, false},
		{"empty batch", nil, nil, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd := SetVolumeStates{Meta: aggregate.Meta{ID: "batch"}, Changes: tc.changes}
			evs, err := Decide(base, cmd)
			if tc.refused {
				assert.ErrorIs(t, err, ErrIllegalCommand)
				assert.Empty(t, evs)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, evs)
			after, err := FoldSkipping(base, envs(evs...)...)
			require.NoError(t, err)
			if tc.once {
				return
			}
			again, err := Decide(after, cmd)
			require.NoError(t, err)
			assert.Empty(t, again, "re-deciding the batch on its own result yields nothing")
		})
	}
}

// A batch stored in part (a crash between its events on a single-replica
// stream) is completed by deciding it again: exactly the rest.
func TestDecideSetVolumeStatesCompletesAPrefix(t *testing.T) {
	base := fold(t, upTo(events.NodeSwitchingOver)...)
	cmd := SetVolumeStates{Meta: aggregate.Meta{ID: "batch"}, Changes: []SetVolumeState{
		{Volume: "v1", To: events.VolumePending},
		{Volume: "v1", To: events.VolumeSwitchingOver, TargetNode: "n2"},
		{Volume: "v1", To: events.VolumeSwitchedOver, TargetNode: "n2"},
		{Volume: "v2", To: events.VolumePending},
	}}
	all, err := Decide(base, cmd)
	require.NoError(t, err)
	require.Len(t, all, 4)
	for n := range len(all) + 1 {
		prefix, err := FoldSkipping(base, envs(all[:n]...)...)
		require.NoError(t, err)
		rest, err := Decide(prefix, cmd)
		require.NoError(t, err, "prefix of %d", n)
		assert.Equal(t, all[n:], nilIfEmptyEvents(rest), "prefix of %d", n)
	}
}

func nilIfEmptyEvents(evs []events.Event) []events.Event {
	if len(evs) == 0 {
		return []events.Event{}
	}
	return evs
}
