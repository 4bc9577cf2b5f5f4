package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"sigs.k8s.io/yaml"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/projector"
)

// objectList is what `replay -o json|yaml` prints: every replayed upgrade's
// DataEngineUpgradeManager and NodeDataEngineUpgrades as the projector
// writes them, in the list `kubectl get -o json` prints, so that one jq or
// yq path reads the live objects and the replayed ones alike.
type objectList struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Items      []any  `json:"items"`
}

// writeObjects prints the upgrades refs names as objects, folded up to the
// sequence until (what --until-seq or --until-time stopped at).
func writeObjects(ctx context.Context, w io.Writer, store *eventstore.Store, refs []events.ManagerRef, until uint64, format string) error {
	list := objectList{APIVersion: "v1", Kind: "List", Items: []any{}}
	for _, ref := range refs {
		objs, err := projector.ReplayObjects(ctx, store, ref, until)
		if err != nil {
			return fmt.Errorf("replay %s: %w", ref, err)
		}
		list.Items = append(list.Items, objs.Manager)
		for _, n := range objs.NodeUpgrades {
			list.Items = append(list.Items, n)
		}
	}
	if format == "yaml" {
		b, err := yaml.Marshal(list)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "    ")
	return enc.Encode(list)
}
