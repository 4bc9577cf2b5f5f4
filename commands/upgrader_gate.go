package commands

import (
	"context"
	"fmt"
	"time"

	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/precheck"
)

// DefaultHoldPoll is how often a held upgrade checks whether what holds it
// is gone.
const DefaultHoldPoll = 10 * time.Second

// gateOtherUpgrader applies NoOtherUpgrader before a new node may start:
// Longhorn's own instance-manager upgrader switched on (or at work) since
// the prechecks holds the upgrade, so that two upgraders never move the same
// engines; once it is off and idle, a hold of that reason is released. It
// reports whether a new node may start. Command ids derive from the state's
// position in history, so a redelivered event decides the same commands.
func (o *Orchestrator) gateOtherUpgrader(ctx context.Context, st manager.State) (bool, error) {
	u, err := o.cfg.Cluster.LonghornUpgrader(ctx)
	if err != nil {
		return false, fmt.Errorf("manager %s: read Longhorn's own upgrader: %w", st.Ref, err)
	}
	r := precheck.OtherUpgrader(u)
	at := fmt.Sprintf("/%d", st.Transitions)
	switch {
	case !r.Passed:
		return false, o.manager(ctx, st.Ref, manager.Hold{ID: "orchestrator/hold" + at, Reason: r.Reason, Message: r.Message})
	case st.Held != nil && st.Held.Reason == precheck.ReasonOtherUpgraderActive:
		return true, o.manager(ctx, st.Ref, manager.Release{ID: "orchestrator/release" + at, Message: r.Message})
	}
	return st.Held == nil, nil
}

// watchHolds re-checks the held upgrades every poll until ctx ends: what
// holds them changes in Longhorn, not in history, so no event would wake
// them.
func (o *Orchestrator) watchHolds(ctx context.Context, poll time.Duration) {
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		held, err := o.heldFromStream(ctx)
		if err != nil {
			o.log.Warn("list held upgrades", "error", err)
			continue
		}
		for _, ref := range held {
			if err := o.recheckHold(ctx, ref); err != nil && ctx.Err() == nil {
				o.log.Warn("re-check held upgrade", "manager", ref.String(), "error", err)
			}
		}
	}
}

func (o *Orchestrator) recheckHold(ctx context.Context, ref events.ManagerRef) error {
	st, err := o.loadManager(ctx, ref)
	if err != nil || st.Terminal() || st.Held == nil {
		return err
	}
	_, err = o.gateOtherUpgrader(ctx, st)
	return err
}
