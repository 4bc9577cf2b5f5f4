package nodeupgrade

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/aggregate/internal/machinetest"
	"github.com/switchback-dev/switchback/events"
)

type fixture = machinetest.Fixture

var stallReplicas = events.NodeStalled{Step: events.NodeFailingReplicas, Reason: "ReplicaNotStopped", Message: "replica vol-a-r-1 still running"}

func fixtures() []fixture {
	var out []fixture
	out = append(out, fixture{Name: "absent"})
	for _, step := range events.NodeSteps {
		out = append(out, fixture{Name: string(step), History: upTo(step)})
	}
	inTransit := append(upTo(events.NodeFailingReplicas), evChanged(events.NodeFailingReplicas),
		evVolume("vol-a", events.VolumePending, events.VolumeSwitchingOver, ""))
	return append(out,
		fixture{Name: "stalled", History: append(upTo(events.NodeFailingReplicas), stallReplicas)},
		fixture{Name: "target-in-transit", History: inTransit},
		fixture{Name: "cancel-target-away", History: append(upTo(events.NodeSwitchingOver), events.NodeCancelRequested{Reason: "manager deleted"})},
		fixture{Name: "cancel-safe", History: append(upTo(events.NodeFailingReplicas), events.NodeCancelRequested{Reason: "manager deleted"})},
		fixture{Name: "completed", History: slices.Clone(timeline)},
		fixture{Name: "error", History: append(upTo(events.NodeUpgradingInstanceManager),
			events.NodeUpgradeFailed{Step: events.NodeUpgradingInstanceManager, Reason: "InstanceManagerNotRunning", Message: "im did not start"})},
		fixture{Name: "cancelled", History: append(upTo(events.NodeFailingReplicas), events.NodeCancelRequested{},
			events.NodeUpgradeCancelled{Step: events.NodeFailingReplicas})},
	)
}

// canonical returns, per event kind, the payload most likely legal in s.
func canonical(s State) map[string]events.Event {
	step := s.State
	if stepIndex(step) < 0 {
		step = events.NodePending
	}
	to, _ := step.Next()
	return map[string]events.Event{
		"started":          evStarted,
		"state-changed":    events.NodeStateChanged{From: step, To: to},
		"completed":        events.NodeUpgradeCompleted{},
		"failed":           events.NodeUpgradeFailed{Step: step, Reason: "Boom", Message: "step failed"},
		"stalled":          events.NodeStalled{Step: step, Volume: "vol-a", Reason: "TargetMoveBlocked", Message: "vol-a: no ready node for its target"},
		"resumed":          events.NodeResumed{Step: step},
		"volume":           evVolume("vol-new", "", events.VolumePending, ""),
		"cancel-requested": events.NodeCancelRequested{Reason: "manager deleted"},
		"cancelled":        events.NodeUpgradeCancelled{Step: step},
	}
}

var (
	working       = []string{"state-changed", "failed", "stalled", "volume", "cancel-requested"}
	legalFinalize = []string{"completed", "failed", "stalled", "volume", "cancel-requested"}
	legalCancel   = []string{"state-changed", "failed", "stalled", "volume", "cancelled"}
)

// legal is the transition matrix; every kind not listed must be refused.
var legal = map[string][]string{
	"absent":                     {"started"},
	"pending":                    working,
	"initializing":               working,
	"failing-replicas":           working,
	"switching-over":             working,
	"upgrading-instance-manager": working,
	"switching-back":             working,
	"rebuilding-replica":         working,
	"finalizing":                 legalFinalize,
	"stalled":                    append(slices.Clone(working), "resumed"),
	"target-in-transit":          working,
	"cancel-target-away":         legalCancel,
	"cancel-safe":                legalCancel,
	"completed":                  nil,
	"error":                      nil,
	"cancelled":                  nil,
}

func TestEvolveTransitionMatrix(t *testing.T) {
	machinetest.EvolveMatrix(t, machine, fixtures(), canonical, legal,
		func(at time.Time, d events.Event) events.Envelope { return envAt(agg, at, d) }, nil)
}

func TestEvolveVolumeMatrix(t *testing.T) {
	// paths reach each volume state from "" through legal changes.
	paths := map[events.VolumeState][]events.VolumeState{
		"":                         nil,
		events.VolumePending:       {events.VolumePending},
		events.VolumeSwitchingOver: {events.VolumePending, events.VolumeSwitchingOver},
		events.VolumeSwitchedOver:  {events.VolumePending, events.VolumeSwitchingOver, events.VolumeSwitchedOver},
		events.VolumeSwitchingBack: {events.VolumePending, events.VolumeSwitchingOver, events.VolumeSwitchedOver, events.VolumeSwitchingBack},
		events.VolumeSwitchedBack:  {events.VolumePending, events.VolumeSwitchingOver, events.VolumeSwitchedOver, events.VolumeSwitchingBack, events.VolumeSwitchedBack},
		events.VolumeCompleted:     {events.VolumePending, events.VolumeCompleted},
		events.VolumeError:         {events.VolumePending, events.VolumeError},
	}
	want := map[[2]events.VolumeState]bool{
		{"", events.VolumePending}:                               true,
		{events.VolumePending, events.VolumeSwitchingOver}:       true,
		{events.VolumePending, events.VolumeCompleted}:           true,
		{events.VolumePending, events.VolumeError}:               true,
		{events.VolumeSwitchingOver, events.VolumeSwitchingOver}: true, // a redirect
		{events.VolumeSwitchingOver, events.VolumeSwitchedOver}:  true,
		{events.VolumeSwitchingOver, events.VolumeSwitchingBack}: true,
		{events.VolumeSwitchingOver, events.VolumeError}:         true,
		{events.VolumeSwitchedOver, events.VolumeSwitchingBack}:  true,
		{events.VolumeSwitchedOver, events.VolumeError}:          true,
		{events.VolumeSwitchingBack, events.VolumeSwitchedBack}:  true,
		{events.VolumeSwitchingBack, events.VolumeError}:         true,
		{events.VolumeSwitchedBack, events.VolumeCompleted}:      true,
		{events.VolumeSwitchedBack, events.VolumeError}:          true,
	}
	all := []events.VolumeState{events.VolumePending, events.VolumeSwitchingOver, events.VolumeSwitchedOver,
		events.VolumeSwitchingBack, events.VolumeSwitchedBack, events.VolumeCompleted, events.VolumeError}
	for from, path := range paths {
		h := []events.Event{evStarted}
		prev := events.VolumeState("")
		for _, st := range path {
			h = append(h, evVolume("vol-a", prev, st, ""))
			prev = st
		}
		s := fold(t, h...)
		require.Equal(t, from, s.Volumes["vol-a"].State)
		for _, to := range all {
			t.Run(string(from)+"->"+string(to), func(t *testing.T) {
				legal := want[[2]events.VolumeState{from, to}]
				require.Equal(t, legal, VolumeTransitionAllowed(from, to))
				got, err := Evolve(s, env(evVolume("vol-a", from, to, "node-2")))
				if !legal {
					machinetest.RequireTransitionError(t, err, Machine, string(events.NodePending), events.TypeVolumeStateChanged)
					require.Equal(t, s, got)
					return
				}
				require.NoError(t, err)
				require.Equal(t, Volume{State: to, TargetNode: "node-2"}, got.Volumes["vol-a"])
				// A From that does not match the recorded state is illegal.
				for _, wrong := range append([]events.VolumeState{""}, all...) {
					if wrong == from {
						continue
					}
					_, err := Evolve(s, env(evVolume("vol-a", wrong, to, "")))
					machinetest.RequireTransitionError(t, err, Machine, string(events.NodePending), events.TypeVolumeStateChanged)
				}
			})
		}
	}
}

func TestEvolveEffects(t *testing.T) {
	t.Run("started opens the aggregate", func(t *testing.T) {
		s := fold(t, evStarted)
		require.Equal(t, State{
			Exists: true, Manager: ref, Node: node, State: events.NodePending, DataEngine: "v2",
			InstanceManagerImage: image, Attempt: 1, UpdatedAt: t0, Transitions: 1,
		}, s)
	})
	t.Run("full timeline completes with every volume completed", func(t *testing.T) {
		s := fold(t, timeline...)
		require.Equal(t, events.NodeCompleted, s.State)
		require.Equal(t, map[string]Volume{
			"vol-a": {State: events.VolumeCompleted, TargetNode: node},
			"vol-b": {State: events.VolumeCompleted},
		}, s.Volumes)
		require.Equal(t, "node upgrade completed", s.Message)
		require.Equal(t, len(timeline), s.Transitions)
	})
	t.Run("an empty target keeps the recorded one", func(t *testing.T) {
		s := fold(t, upTo(events.NodeSwitchingOver)...)
		require.Equal(t, Volume{State: events.VolumeSwitchedOver, TargetNode: "node-2"}, s.Volumes["vol-a"])
		require.Equal(t, []string{"vol-a"}, s.VolumesWhere(Volume.TargetAway))
	})
	t.Run("stall keeps its start across updates and a step change clears it", func(t *testing.T) {
		h := envs(append(upTo(events.NodeFailingReplicas), stallReplicas,
			events.NodeStalled{Step: events.NodeFailingReplicas, Reason: "ReplicaNotDeleted", Message: "replica vol-a-r-1 not deleted"})...)
		s, err := FoldSkipping(State{}, h[:len(h)-1]...)
		require.NoError(t, err)
		stalledAt := h[len(h)-2].Time
		require.True(t, s.Stalled)
		require.Equal(t, stalledAt, s.StalledAt)
		s, err = Evolve(s, h[len(h)-1])
		require.NoError(t, err)
		require.Equal(t, stalledAt, s.StalledAt, "an updated stall keeps its start")
		require.Equal(t, "ReplicaNotDeleted", s.StallReason)
		require.Equal(t, "replica vol-a-r-1 not deleted", s.Message)
		require.Equal(t, events.NodeFailingReplicas, s.StallStep)

		s, err = Evolve(s, env(evChanged(events.NodeFailingReplicas)))
		require.NoError(t, err)
		require.False(t, s.Stalled)
		require.Empty(t, s.StallReason)
		require.Zero(t, s.StalledAt)
	})
	t.Run("resumed clears the stall", func(t *testing.T) {
		s := fold(t, append(upTo(events.NodeFailingReplicas), stallReplicas,
			events.NodeResumed{Step: events.NodeFailingReplicas})...)
		require.False(t, s.Stalled)
		require.Equal(t, "progressing again at failing-replicas", s.Message)
		require.Equal(t, events.NodeFailingReplicas, s.State)
	})
	t.Run("failed records step and reason", func(t *testing.T) {
		s := fold(t, append(upTo(events.NodeUpgradingInstanceManager), stallReplicasAt(events.NodeUpgradingInstanceManager),
			events.NodeUpgradeFailed{Step: events.NodeUpgradingInstanceManager, Reason: "InstanceManagerNotRunning", Message: "im did not start"})...)
		require.Equal(t, events.NodeError, s.State)
		require.Equal(t, events.NodeUpgradingInstanceManager, s.FailedStep)
		require.Equal(t, "InstanceManagerNotRunning", s.FailReason)
		require.Equal(t, "im did not start", s.Message)
		require.False(t, s.Stalled)
	})
	t.Run("cancelled records the step", func(t *testing.T) {
		s := fold(t, append(upTo(events.NodeFailingReplicas), events.NodeCancelRequested{Reason: "deleted"},
			events.NodeUpgradeCancelled{Step: events.NodeFailingReplicas})...)
		require.Equal(t, events.NodeCancelled, s.State)
		require.Equal(t, events.NodeFailingReplicas, s.CancelledStep)
		require.True(t, s.CancelRequested)
		require.Equal(t, "deleted", s.CancelReason)
		require.Equal(t, "node upgrade cancelled at failing-replicas", s.Message)
	})
}

func stallReplicasAt(step events.NodeState) events.NodeStalled {
	st := stallReplicas
	st.Step = step
	return st
}

func TestEvolveRefusals(t *testing.T) {
	started := []events.Event{evStarted}
	cases := []machinetest.EventRefusal{
		{Name: "no data", History: started, Env: events.Envelope{Aggregate: agg}, Reason: "no data"},
		{Name: "manager aggregate", History: started, Env: envAt(events.ManagerAggregate(ref), t0, evChanged(events.NodePending)), Reason: "manager event"},
		{Name: "another node", History: started, Env: envAt(events.NodeAggregate(ref, "node-2"), t0, evChanged(events.NodePending)), Reason: "belongs to"},
		{Name: "another manager", History: started, Env: envAt(events.NodeAggregate(otherRef, node), t0, evChanged(events.NodePending)), Reason: "belongs to"},
		{Name: "start payload names another node", History: nil, Env: envAt(events.NodeAggregate(ref, "node-2"), t0, evStarted), Reason: "payload names node"},
		{Name: "invalid payload", History: nil, Env: env(events.NodeUpgradeStarted{Node: node, DataEngine: "v2", InstanceManagerImage: image}), Reason: "invalid payload"},
		{Name: "manager event type", History: started, Env: env(events.CancelRequested{}), Reason: "not a node-upgrade event"},
		{Name: "open with another event", History: nil, Env: env(evChanged(events.NodePending)), Reason: "only " + string(events.TypeNodeUpgradeStarted)},
		{Name: "started twice", History: started, Env: env(evStarted), Reason: "already started"},
		{Name: "change from another step", History: started, Env: env(evChanged(events.NodeInitializing)), Reason: "change from initializing"},
		{Name: "change skipping a step", History: started, Env: env(events.NodeStateChanged{From: events.NodePending, To: events.NodeFailingReplicas}), Reason: "the step after pending is initializing"},
		{Name: "change backwards", History: upTo(events.NodeSwitchingOver), Env: env(events.NodeStateChanged{From: events.NodeSwitchingOver, To: events.NodeFailingReplicas}), Reason: "not failing-replicas"},
		{Name: "change finalizing to completed", History: upTo(events.NodeFinalizing), Env: env(evChanged(events.NodeFinalizing)), Reason: "is left only by"},
		{Name: "complete before finalizing", History: upTo(events.NodeRebuildingReplica), Env: env(events.NodeUpgradeCompleted{}), Reason: "only from finalizing"},
		{Name: "fail at another step", History: started, Env: env(events.NodeUpgradeFailed{Step: events.NodeSwitchingBack, Reason: "R", Message: "m"}), Reason: "failure reported for step"},
		{Name: "fail without message", History: started, Env: env(events.NodeUpgradeFailed{Step: events.NodePending, Reason: "R"}), Reason: "invalid payload"},
		{Name: "stall at another step", History: started, Env: env(stallReplicas), Reason: "stall reported for step"},
		{Name: "resume when not stalled", History: started, Env: env(events.NodeResumed{Step: events.NodePending}), Reason: "not stalled"},
		{Name: "resume another step", History: append(upTo(events.NodeFailingReplicas), stallReplicas), Env: env(events.NodeResumed{Step: events.NodePending}), Reason: "resume reported for step"},
		{Name: "volume from mismatch", History: upTo(events.NodeInitializing), Env: env(evVolume("vol-a", "", events.VolumePending, "")), Reason: `change from ""`},
		{Name: "volume illegal move", History: upTo(events.NodeInitializing), Env: env(evVolume("vol-a", events.VolumePending, events.VolumeSwitchedBack, "")), Reason: "not allowed"},
		{Name: "volume unknown state", History: started, Env: env(evVolume("vol-a", "", "moving", "")), Reason: "invalid payload"},
		{Name: "cancel requested twice", History: append(slices.Clone(started), events.NodeCancelRequested{}), Env: env(events.NodeCancelRequested{}), Reason: "already requested"},
		{Name: "cancelled without request", History: started, Env: env(events.NodeUpgradeCancelled{Step: events.NodePending}), Reason: "no cancel was requested"},
		{Name: "cancelled at another step", History: append(slices.Clone(started), events.NodeCancelRequested{}), Env: env(events.NodeUpgradeCancelled{Step: events.NodeSwitchingOver}), Reason: "cancel confirmed at step"},
	}
	machinetest.EvolveRefusals(t, machine, cases)
}

func TestFoldSkipsIllegalAndJoinsErrors(t *testing.T) {
	h := envs(evStarted, evChanged(events.NodeInitializing), evChanged(events.NodePending), evStarted)
	s, err := FoldSkipping(State{}, h...)
	require.ErrorIs(t, err, ErrIllegalTransition)
	require.Len(t, err.(interface{ Unwrap() []error }).Unwrap(), 2)
	require.Equal(t, events.NodeInitializing, s.State)
	p, _ := FoldSkipping(State{}, h[:2]...)
	all, _ := FoldSkipping(p, h[2:]...)
	require.Equal(t, s, all)
}
