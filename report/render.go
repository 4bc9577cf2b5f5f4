package report

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/plan"
	"github.com/switchback-dev/switchback/replay"
)

// pageTemplate is the whole page: styles inline and no script, so the file
// shows the same anywhere, offline, attached to a ticket.
//
//go:embed page.html.tmpl
var pageTemplate string

var page = template.Must(template.New("page").Funcs(template.FuncMap{
	"steps":      func() []events.NodeState { return events.NodeSteps },
	"stepIndex":  func(s events.NodeState) int { return slices.Index(events.NodeSteps, s) },
	"clock":      clock,
	"dur":        duration,
	"since":      func(v view, at time.Time) string { return "+" + duration(at.Sub(v.Start)) },
	"nodeDur":    func(n *Node) time.Duration { return n.End.Sub(n.Start) },
	"spanDur":    func(s Span) time.Duration { return s.End.Sub(s.Start) },
	"stepTitle":  stepTitle,
	"stallTitle": stallTitle,
	"errorsOf":   errorsOf,
	"anyStall": func(v view) bool {
		return slices.ContainsFunc(v.Nodes, func(n *Node) bool { return len(n.Stalls) > 0 })
	},
	"anyVolume": func(v view) bool {
		return slices.ContainsFunc(v.Nodes, func(n *Node) bool { return len(n.Volumes) > 0 })
	},
	"anyRebuild": func(v view) bool {
		return slices.ContainsFunc(v.Nodes, func(n *Node) bool { return n.Rebuild != nil })
	},
	"bytes": plan.Bytes,
	"anyMoved": func(v view) bool {
		return slices.ContainsFunc(v.Nodes, func(n *Node) bool { return len(n.Moved) > 0 })
	},
	"join":  strings.Join,
	"ticks": ticks,
	"meter": meter,
}).Parse(pageTemplate))

// Render writes t as one HTML document that refers to nothing outside
// itself. Bars are placed in percent of the timeline's span, so the page
// fits any window; each carries its node, step and stall as data
// attributes and its times and messages as the title shown on hover.
func Render(w io.Writer, t *Timeline) error {
	if err := page.Execute(w, view{t}); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

// view is what the page is executed on: the timeline, and the placing of
// things in its span.
type view struct{ *Timeline }

// Place is the style that spans a bar from a to b.
func (v view) Place(a, b time.Time) template.CSS {
	return template.CSS(fmt.Sprintf("left:%s%%;width:%s%%", percent(v.offset(a)), percent(Share(b.Sub(a), v.Totals.Duration))))
}

// At is the style that puts a mark at a.
func (v view) At(a time.Time) template.CSS { return template.CSS("left:" + percent(v.offset(a)) + "%") }

// offset is where at lies in the timeline, in percent.
func (t *Timeline) offset(at time.Time) float64 { return Share(at.Sub(t.Start), t.Totals.Duration) }

func percent(v float64) string { return fmt.Sprintf("%.3f", v) }

// clock is how the page gives a time: as `switchback history` does.
func clock(t time.Time) string { return t.Format(replay.TimeFormat) }

// duration rounds d to what a reader compares: milliseconds under a
// minute, seconds above.
func duration(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return fmt.Sprintf("%.3fs", d.Seconds())
	}
	return d.Round(time.Second).String()
}

// tick is one label of the time axis.
type tick struct {
	At    time.Time
	Label string
}

// ticks label the axis at every quarter of the span.
func ticks(v view) []tick {
	out := make([]tick, 0, 5)
	for i := range 5 {
		d := v.Totals.Duration * time.Duration(i) / 4
		out = append(out, tick{At: v.Start.Add(d), Label: "+" + duration(d)})
	}
	return out
}

// meter is the width of a step's total against the longest step's.
func meter(s StepTotal, all []StepTotal) template.CSS {
	var longest time.Duration
	for _, o := range all {
		longest = max(longest, o.Total)
	}
	return template.CSS(fmt.Sprintf("width:%.1fpx", Share(s.Total, longest)*1.6))
}

// errorsOf are the errors of one node, marked on its row.
func errorsOf(v view, node string) []Mark {
	var out []Mark
	for _, m := range v.Errors {
		if m.Node == node {
			out = append(out, m)
		}
	}
	return out
}

// stepTitle is the hover text of a step's bar: its times, the messages
// that entered and left it, and its stalls.
func stepTitle(n *Node, s *Step) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s · %s\n%s → %s (%s)", n.Name, s.Name, clock(s.Start), clock(s.End), duration(s.Duration()))
	if s.Message != "" {
		b.WriteString("\nentered: " + s.Message)
	}
	switch {
	case s.Open:
		b.WriteString("\nstill in this step when the history ends")
	case s.CloseMessage != "":
		b.WriteString("\n" + s.Outcome + ": " + s.CloseMessage)
	}
	for _, st := range n.Stalls {
		if st.Step == s.Name {
			b.WriteString("\n" + stallTitle(n, st))
		}
	}
	return b.String()
}

// stallTitle is the hover text of a stall: how long, why, and every
// message it was reported with.
func stallTitle(n *Node, s *Stall) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s STALLED in %s for %s: %s", n.Name, s.Step, duration(s.End.Sub(s.Start)), s.Reason)
	for _, m := range s.Messages {
		b.WriteString("\n" + m)
	}
	return b.String()
}
