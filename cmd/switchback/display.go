package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/aggregate/upgrade"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/replay"
	"github.com/switchback-dev/switchback/sim"
)

// watchDemo follows the upgrade's events and shows progress until the
// manager ends: a live table on a terminal, one line per event otherwise.
// The display folds the stream itself, the way replay does.
func watchDemo(ctx context.Context, conn *natsConn, cluster *sim.Sim, ref events.ManagerRef, stdout io.Writer) (manager.State, error) {
	live := isTerminalWriter(stdout)
	u := &replay.Upgrade{Upgrade: upgrade.New()}
	drawn := 0
	lastDraw := time.Time{}
	err := followEvents(ctx, conn, events.ManagerSubjectPrefix(ref)+".>", 0, func(e events.Envelope, pending uint64) bool {
		_ = u.Apply(e) // a refused event changes nothing, as in replay
		done := u.Manager.Terminal()
		if !live {
			if _, vol := e.Data.(events.VolumeStateChanged); !vol || done {
				fmt.Fprintln(stdout, replay.Describe(e))
			}
		} else if done || time.Since(lastDraw) > 100*time.Millisecond || pending == 0 {
			drawn = redraw(stdout, u, cluster, drawn)
			lastDraw = time.Now()
		}
		return done
	}, nil)
	if err == nil && !u.Manager.Terminal() {
		err = fmt.Errorf("the upgrade did not end in time: %s (%s)", u.Manager.State, u.Manager.Message)
	}
	return u.Manager, err
}

// redraw replaces the previous table (drawn lines) with the current one.
func redraw(w io.Writer, u *replay.Upgrade, cluster *sim.Sim, drawn int) int {
	var b strings.Builder
	if drawn > 0 {
		fmt.Fprintf(&b, "\033[%dA\033[J", drawn)
	}
	m := u.Manager
	io := cluster.IOStats()
	lines := []string{
		fmt.Sprintf("upgrade %s/%s: %s  target image %s", m.Ref.Namespace, m.Ref.Name, m.State, dash(m.InstanceManagerImage)),
		fmt.Sprintf("I/O checker: %d I/Os, %d failed", io.Issued, io.Failed),
		fmt.Sprintf("%-12s %-30s %-8s %-13s %s", "NODE", "STEP", "VOLUMES", "TARGETS AWAY", "MESSAGE"),
	}
	for _, name := range u.NodeNames() {
		n, started := u.Nodes[name]
		step := "waiting"
		if started {
			step = string(n.State)
			if n.Stalled {
				step += " (STALLED)"
			}
		}
		away := 0
		for _, v := range n.Volumes {
			if v.TargetAway() {
				away++
			}
		}
		msg := n.Message
		if n.Stalled {
			msg = n.StallMessage
		}
		if len(msg) > 80 {
			msg = msg[:77] + "..."
		}
		lines = append(lines, fmt.Sprintf("%-12s %-30s %-8d %-13d %s", name, step, len(n.Volumes), away, msg))
	}
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
	fmt.Fprint(w, b.String())
	return len(lines)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// isTerminalWriter reports whether w is a terminal (live display) rather
// than a pipe or a file (plain lines).
func isTerminalWriter(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// describeWorstStall says how long I/O waited at worst because of the
// upgrade: the longest stall over the I/O checker's threshold not caused by
// an injected fault, with its volume and cause, or that there was none.
func describeWorstStall(io sim.IOStats) string {
	n := len(io.StallsByActions())
	if n == 0 {
		return "no I/O waited longer than the stall threshold"
	}
	w := io.WorstStall()
	s := fmt.Sprintf("%d stall(s) over the threshold; the worst %s on volume %s (%s)", n, w.Duration(io.At).Round(time.Millisecond), w.Volume, w.Cause)
	if w.Phase != "" {
		s += " during " + w.Phase
	}
	return s
}
