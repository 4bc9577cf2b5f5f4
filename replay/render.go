package replay

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/switchback-dev/switchback/events"
)

// View is the printable form of an upgrade (what `switchback replay -o json`
// prints): stable field names, independent of the folds' internal structs.
type View struct {
	Namespace            string              `json:"namespace"`
	Name                 string              `json:"name"`
	UID                  string              `json:"uid"`
	State                events.ManagerState `json:"state"`
	Message              string              `json:"message,omitempty"`
	InstanceManagerImage string              `json:"instanceManagerImage,omitempty"`
	UpgradingNode        string              `json:"upgradingNode,omitempty"`
	Plan                 []string            `json:"plan,omitempty"`
	Prechecks            []PrecheckView      `json:"prechecks,omitempty"`
	Nodes                []NodeView          `json:"nodes,omitempty"`
	LastSequence         uint64              `json:"lastSequence"`
	UpdatedAt            time.Time           `json:"updatedAt,omitzero"`
}

// PrecheckView is one precheck result.
type PrecheckView struct {
	Check   string `json:"check"`
	Passed  bool   `json:"passed"`
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
}

// NodeView is one node upgrade.
type NodeView struct {
	Node    string            `json:"node"`
	State   events.NodeState  `json:"state"`
	Stalled bool              `json:"stalled,omitempty"`
	Message string            `json:"message,omitempty"`
	Volumes map[string]string `json:"volumes,omitempty"`
}

// View returns the printable form of u.
func (u *Upgrade) View() View {
	m := u.Manager
	v := View{
		Namespace: m.Ref.Namespace, Name: m.Ref.Name, UID: m.Ref.UID, State: m.State, Message: m.Message,
		InstanceManagerImage: m.InstanceManagerImage, UpgradingNode: m.UpgradingNode, Plan: m.Plan,
		LastSequence: u.LastSequence, UpdatedAt: m.UpdatedAt,
	}
	for _, p := range m.Prechecks {
		v.Prechecks = append(v.Prechecks, PrecheckView(p))
	}
	for _, name := range u.NodeNames() {
		n, ok := u.Nodes[name]
		nv := NodeView{Node: name, State: n.State, Stalled: n.Stalled, Message: n.Message}
		if !ok {
			// The word the NodeDataEngineUpgrade and the manager's status use.
			nv.State = events.NodePending
			if ms, scheduled := m.Nodes[name]; scheduled {
				nv.State = ms.State
			}
		}
		if len(n.Volumes) > 0 {
			nv.Volumes = map[string]string{}
			for vol, vs := range n.Volumes {
				nv.Volumes[vol] = string(vs.State)
			}
		}
		v.Nodes = append(v.Nodes, nv)
	}
	return v
}

// Write prints r in format "table", "json" or "yaml".
func (r *Result) Write(w io.Writer, format string) error {
	views := make([]View, len(r.Upgrades))
	for i, u := range r.Upgrades {
		views[i] = u.View()
	}
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(views)
	case "yaml":
		b, err := yaml.Marshal(views)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	case "table", "":
		return writeTable(w, views, r)
	}
	return fmt.Errorf("unknown output format %q (want table, json or yaml)", format)
}

func writeTable(w io.Writer, views []View, r *Result) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if err := r.MissingErr(); err != nil {
		fmt.Fprintf(tw, "HISTORY INCOMPLETE: %v\n\n", err)
	}
	if len(views) == 0 {
		fmt.Fprintln(tw, "no upgrade in the stream (up to sequence", r.LastSequence, ")")
	}
	for i, v := range views {
		if i > 0 {
			fmt.Fprintln(tw)
		}
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
				fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\n", n.Node, state, len(n.Volumes), oneLine(n.Message))
			}
		}
	}
	if len(r.Parked) > 0 {
		fmt.Fprintf(tw, "\n%d message(s) on the stream did not decode and were skipped; the first: %v\n", len(r.Parked), r.Parked[0])
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }
