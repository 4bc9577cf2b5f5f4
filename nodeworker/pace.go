package nodeworker

import (
	"fmt"
	"time"
)

// A step's loop (run.loop) observes, decides and applies a round at a
// time; pace is what it makes of a round that neither ended the step nor
// failed it: a pure function of the round's outcome, the loop's memory and
// the time, so that the stall and failure rules are read, and tested, in
// one place.

// policy is the loop's timing.
type policy struct {
	// stallAfter: a step blocked this long is reported stalled.
	stallAfter time.Duration
	// failAfter: a step blocked this long on a permanent cause fails.
	failAfter time.Duration
	// idle is the longest wait without a wake (the resync, or the poll).
	idle time.Duration
}

// pacing is what the loop remembers between rounds: since when the step
// has made no progress.
type pacing struct {
	blockedSince time.Time
}

// turn is what the loop does next.
type turn struct {
	// pacing is the memory for the next round.
	pacing pacing
	// resume reports the step progressing again (it was stalled).
	resume bool
	// stall reports the step stalled on this block.
	stall *block
	// fail ends the node upgrade in error with this block, its message
	// saying how long nothing progressed.
	fail *block
	// again observes again at once: the round changed something.
	again bool
	// wait is how long to wait for a wake before observing again: the
	// idle time, or less when a stall or failure falls due sooner.
	wait time.Duration
}

// pace decides the loop's next move after a round whose outcome is out,
// with the step stalled or not, the loop's memory p, at now.
func pace(out outcome, stalled bool, p pacing, now time.Time, pol policy) turn {
	if out.progressed || p.blockedSince.IsZero() {
		p.blockedSince = now
	}
	t := turn{pacing: p, resume: out.progressed && stalled, again: out.progressed}
	blocked := now.Sub(p.blockedSince)
	b := out.block
	if b != nil && !out.progressed {
		if b.permanent && blocked >= pol.failAfter {
			t.fail = &block{volume: b.volume, reason: b.reason, permanent: true,
				message: fmt.Sprintf("%s (no progress for %s)", b.message, blocked.Round(time.Second))}
			return t
		}
		if blocked >= pol.stallAfter && !now.Before(b.until) {
			t.stall = b
		}
	}
	t.wait = pol.idle
	if b == nil {
		return t
	}
	if left := pol.stallAfter - blocked; left > 0 {
		t.wait = min(t.wait, left)
	}
	if left := pol.failAfter - blocked; b.permanent && left > 0 {
		t.wait = min(t.wait, left)
	}
	if left := b.until.Sub(now); left > 0 {
		t.wait = min(t.wait, left)
	}
	return t
}
