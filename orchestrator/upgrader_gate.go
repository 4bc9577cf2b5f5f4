package orchestrator

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/switchback-dev/switchback/aggregate"
	"github.com/switchback-dev/switchback/internal/periodic"

	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/precheck"
)

// DefaultHoldPoll is how often a held upgrade checks whether what holds it
// is gone.
const DefaultHoldPoll = 10 * time.Second

// gateReasons are the holds gateOtherUpgrader places, and releases.
var gateReasons = []string{precheck.ReasonOtherUpgraderActive, precheck.ReasonOtherUpgraderUnknown}

// gateOtherUpgrader applies NoOtherUpgrader before a new node may start:
// Longhorn's own instance-manager upgrader switched on (or at work) since
// the prechecks, or unreadable, holds the upgrade, so that two upgraders
// never move the same engines; once it is off and idle, a hold the gate
// placed is released. It reports whether a new node may start. Command ids
// name the state they were decided on: a command decided again on the same
// state is the same command.
func (o *Orchestrator) gateOtherUpgrader(ctx context.Context, st manager.State) (bool, error) {
	at := fmt.Sprintf("/%d", st.Transitions)
	u, err := o.cfg.Cluster.LonghornUpgrader(ctx)
	if err != nil {
		o.log.Warn("cannot read Longhorn's own upgrader; holding the upgrade", "manager", st.Ref.String(), "error", err)
		return false, o.manager(ctx, st.Ref, manager.Hold{Meta: aggregate.Meta{ID: "orchestrator/hold" + at}, Reason: precheck.ReasonOtherUpgraderUnknown,
			Message: fmt.Sprintf("Longhorn's own instance-manager upgrader cannot be read (%v): no new node starts until it can", err)})
	}
	r := precheck.OtherUpgrader(u)
	switch {
	case !r.Passed:
		return false, o.manager(ctx, st.Ref, manager.Hold{Meta: aggregate.Meta{ID: "orchestrator/hold" + at}, Reason: r.Reason, Message: r.Message})
	case st.Held != nil && slices.Contains(gateReasons, st.Held.Reason):
		return true, o.manager(ctx, st.Ref, manager.Release{Meta: aggregate.Meta{ID: "orchestrator/release" + at}, Message: r.Message})
	}
	return st.Held == nil, nil
}

// watchHolds re-checks the held upgrades every poll until ctx ends: what
// holds them changes in Longhorn, not in history, so no event would wake
// them.
func (o *Orchestrator) watchHolds(ctx context.Context, poll time.Duration) {
	periodic.Every(ctx, poll, func() {
		held, err := o.active.held(ctx)
		if err != nil {
			o.log.Warn("list held upgrades", "error", err)
			return
		}
		for _, ref := range held {
			if err := o.recheckHold(ctx, ref); err != nil && ctx.Err() == nil {
				o.log.Warn("re-check held upgrade", "manager", ref.String(), "error", err)
			}
		}
	})
}

func (o *Orchestrator) recheckHold(ctx context.Context, ref events.ManagerRef) error {
	st, err := o.loadManager(ctx, ref, 0)
	if err != nil || st.Terminal() || st.Held == nil {
		return err
	}
	_, err = o.gateOtherUpgrader(ctx, st)
	return err
}
