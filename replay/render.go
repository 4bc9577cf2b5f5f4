package replay

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/events"
)

// view is an upgrade as the table prints it.
type view struct {
	Namespace, Name      string
	State                events.ManagerState
	Message              string
	InstanceManagerImage string
	UpgradingNode        string
	Plan                 []string
	Prechecks            []manager.PrecheckResult
	Nodes                []nodeView
	LastSequence         uint64
}

type nodeView struct {
	Node    string
	State   events.NodeState
	Stalled bool
	Message string
	Volumes int
}

// view returns the printable form of u.
func (u *Upgrade) view() view {
	m := u.Manager
	v := view{
		Namespace: m.Ref.Namespace, Name: m.Ref.Name, State: m.State, Message: m.Message,
		InstanceManagerImage: m.InstanceManagerImage, UpgradingNode: m.UpgradingNode, Plan: m.Plan,
		Prechecks: m.Prechecks, LastSequence: u.LastSequence,
	}
	for _, name := range u.NodeNames() {
		n, ok := u.Nodes[name]
		nv := nodeView{Node: name, State: n.State, Stalled: n.Stalled, Message: n.Message, Volumes: len(n.Volumes)}
		if !ok {
			// The word the NodeDataEngineUpgrade and the manager's status use.
			nv.State = events.NodePending
			if ms, scheduled := m.Nodes[name]; scheduled {
				nv.State = ms.State
			}
		}
		v.Nodes = append(v.Nodes, nv)
	}
	return v
}

// WriteTable prints r as a table: per upgrade its state and one line per
// node. (`switchback replay -o json|yaml` prints the objects instead, as the
// projector writes them.)
func (r *Result) WriteTable(w io.Writer) error {
	if err := r.MissingErr(); err != nil {
		fmt.Fprintf(w, "HISTORY INCOMPLETE: %v\n\n", err)
	}
	t := NewTableWriter(w)
	for _, u := range r.Upgrades {
		if err := t.Add(u); err != nil {
			return err
		}
	}
	return t.close(r, false)
}

// TableWriter prints upgrades as Stream hands them out, in WriteTable's
// form, each as it comes.
type TableWriter struct {
	w io.Writer
	n int
}

// NewTableWriter returns a TableWriter printing to w.
func NewTableWriter(w io.Writer) *TableWriter { return &TableWriter{w: w} }

// Add prints u.
func (t *TableWriter) Add(u *Upgrade) error {
	v := u.view()
	tw := tabwriter.NewWriter(t.w, 0, 4, 2, ' ', 0)
	if t.n > 0 {
		fmt.Fprintln(tw)
	}
	t.n++
	done := 0
	for _, n := range v.Nodes {
		if n.State == events.NodeCompleted {
			done++
		}
	}
	fmt.Fprintf(tw, "MANAGER\tSTATE\tUPGRADING\tNODES\tIMAGE\tSEQ\n")
	fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%d/%d\t%s\t%d\n", v.Namespace, v.Name, v.State, dash(v.UpgradingNode), done, len(v.Plan), dash(v.InstanceManagerImage), v.LastSequence)
	if v.Message != "" {
		fmt.Fprintf(tw, "  message: %s\n", v.Message)
	}
	for _, p := range v.Prechecks {
		if !p.Passed {
			fmt.Fprintf(tw, "  precheck %s failed (%s): %s\n", p.Check, p.Reason, p.Message)
		}
	}
	if len(v.Nodes) > 0 {
		fmt.Fprintf(tw, "  NODE\tSTATE\tVOLUMES\tMESSAGE\n")
		for _, n := range v.Nodes {
			state := string(n.State)
			if n.Stalled {
				state += " (stalled)"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\n", n.Node, state, n.Volumes, oneLine(n.Message))
		}
	}
	return tw.Flush()
}

// Close prints what the replay r found beside the upgrades: none at all,
// events that came late or did not decode, history lost from the stream.
func (t *TableWriter) Close(r *Result) error { return t.close(r, true) }

func (t *TableWriter) close(r *Result, missing bool) error {
	w := t.w
	if t.n == 0 {
		fmt.Fprintln(w, "no upgrade in the stream (up to sequence", r.LastSequence, ")")
	}
	if r.Late > 0 {
		fmt.Fprintf(w, "\n%d event(s) came more than %d sequences after their upgrade had ended and are not in it; the first: seq %d\n", r.Late, SettleSequences, r.FirstLate)
	}
	if len(r.Parked) > 0 {
		fmt.Fprintf(w, "\n%d message(s) on the stream did not decode and were skipped; the first: %v\n", len(r.Parked), r.Parked[0])
	}
	if err := r.MissingErr(); err != nil && missing {
		_, err := fmt.Fprintf(w, "\nHISTORY INCOMPLETE: %v\n", err)
		return err
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }
