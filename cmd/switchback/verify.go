package main

import (
	"context"
	"fmt"
	"io"
	"sort"

	"github.com/spf13/pflag"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/kubeclient"
	"github.com/switchback-dev/switchback/projector"
	"github.com/switchback-dev/switchback/replay"
)

// verifyFlags turn replay into a check of the live status.
type verifyFlags struct {
	enabled bool
	kube    kubeFlags
	client  *kubeclient.Client // set by tests and the demo
}

func (f *verifyFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&f.enabled, "verify", false, "compare the replayed state with the live custom resources' status; exit 3 on any difference")
	f.kube.register(fs, "with --verify: ")
}

// diffError is a verification failure: exit code 3.
type diffError struct{ n, missing int }

func (e diffError) Error() string {
	if e.missing > 0 {
		return fmt.Sprintf("%d difference(s) between the stream and the live status, %d of them run(s) of events lost from the stream", e.n, e.missing)
	}
	return fmt.Sprintf("%d difference(s) between the stream and the live status", e.n)
}

// ExitCode implements exitCoder.
func (e diffError) ExitCode() int { return 3 }

// verify compares each replayed manager (managers: as the replay folded
// them) that exists in Kubernetes
// (same UID) with what the projector would write, ignoring what only the
// live objects know (generations, condition timestamps). Sequences lost from
// the stream (res.Missing) count as differences: the replay is then no
// reference for anything.
func (f *verifyFlags) verify(ctx context.Context, store *eventstore.Store, res *replay.Result, managers []events.ManagerRef, w io.Writer) error {
	kc := f.client
	if kc == nil {
		cfg, err := f.kube.config()
		if err != nil {
			return err
		}
		if kc, err = kubeclient.New(cfg); err != nil {
			return err
		}
	}
	diffs := 0
	checked := 0
	// Lost history is a difference with the truth whatever the status says:
	// the status may even match the remains.
	for _, r := range res.Missing {
		fmt.Fprintf(w, "MISSING seq %s: lost from the stream\n", r)
		diffs++
	}
	for _, ref := range managers {
		if ref.UID == "" {
			continue
		}
		live, err := kc.Managers(ref.Namespace).Get(ctx, ref.Name)
		if apierrors.IsNotFound(err) || (err == nil && string(live.UID) != ref.UID) {
			continue // not (or no longer) in Kubernetes
		}
		if err != nil {
			return explainKube("", "read DataEngineUpgradeManager "+ref.Namespace+"/"+ref.Name, err)
		}
		checked++
		want, err := projector.Replay(ctx, store, ref)
		if err != nil {
			return err
		}
		for _, d := range projector.DiffManager(want.Manager, live.Status) {
			fmt.Fprintf(w, "DIFF %s/%s: %s\n", ref.Namespace, ref.Name, d)
			diffs++
		}
		nodes := make([]string, 0, len(want.NodeUpgrades))
		for n := range want.NodeUpgrades {
			nodes = append(nodes, n)
		}
		sort.Strings(nodes)
		for _, n := range nodes {
			obj, err := projector.GetNodeUpgrade(ctx, kc.NodeUpgrades(ref.Namespace), ref, n)
			if err != nil {
				fmt.Fprintf(w, "DIFF %s/%s node %s: NodeDataEngineUpgrade: %v\n", ref.Namespace, ref.Name, n, err)
				diffs++
				continue
			}
			for _, d := range projector.DiffNode(want.NodeUpgrades[n], obj.Status) {
				fmt.Fprintf(w, "DIFF %s/%s node %s: %s\n", ref.Namespace, ref.Name, n, d)
				diffs++
			}
		}
	}
	if diffs > 0 {
		return diffError{n: diffs, missing: len(res.Missing)}
	}
	fmt.Fprintf(w, "verified: %d upgrade(s) in Kubernetes match the stream\n", checked)
	return nil
}
