package precheck

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/switchback-dev/switchback/dataplane"
)

// CheckNoOtherUpgrader refuses to start while Longhorn's own
// instance-manager upgrader is switched on or has work in progress: two
// upgraders moving the same engines would fight (see OtherUpgrader).
func CheckNoOtherUpgrader(in Input) Result { return OtherUpgrader(in.Cluster.Upgrader) }

// OtherUpgrader is the NoOtherUpgrader rule on what Longhorn's own upgrader
// shows. It fails while either automatic-upgrade setting is on for v2 (a
// plain "true", or a per-data-engine JSON object with v2 true), or cannot
// be read as on or off; while its upgrade control is on a node or has a
// node in progress; or while one of its per-node upgrades is neither
// completed nor failed: turning the setting off lets the node in flight
// finish, so the objects are checked as well. The orchestrator applies the
// same rule before each node of a running upgrade.
func OtherUpgrader(u dataplane.LonghornUpgrader) Result {
	var causes []string
	for _, name := range dataplane.AutoUpgradeSettings {
		value, ok := u.Settings[name]
		if !ok {
			continue
		}
		on, err := settingOnForV2(value)
		switch {
		case err != nil:
			causes = append(causes, fmt.Sprintf("setting %s is %q, which reads neither as on nor as off for v2 (%v): set it to \"false\"", name, value, err))
		case on:
			causes = append(causes, fmt.Sprintf("setting %s is %q: %s", name, value, turnOff(value)))
		}
	}
	for _, c := range u.Controls {
		busy := slices.Sorted(func(yield func(string) bool) {
			for n, st := range c.Nodes {
				if st == dataplane.UpgraderNodeInProgress && !yield(n) {
					return
				}
			}
		})
		if c.CurrentNode != "" && !slices.Contains(busy, c.CurrentNode) {
			busy = append([]string{c.CurrentNode}, busy...)
		}
		if len(busy) > 0 {
			causes = append(causes, fmt.Sprintf("instancemanagerupgradecontrols.longhorn.io %s is upgrading node %s: wait until it ends",
				c.Name, strings.Join(busy, ", ")))
		}
	}
	for _, up := range u.Upgrades {
		if !up.Over() {
			causes = append(causes, fmt.Sprintf("instancemanagerupgrades.longhorn.io %s (node %s) is %s: wait until it is completed or failed",
				up.Name, up.Node, orUnknown(up.State)))
		}
	}
	if len(causes) > 0 {
		return fail(NoOtherUpgrader, ReasonOtherUpgraderActive,
			"Longhorn's own instance-manager upgrader would race this upgrade: %s", strings.Join(causes, "; "))
	}
	if len(u.Settings) == 0 && len(u.Controls) == 0 && len(u.Upgrades) == 0 {
		return pass(NoOtherUpgrader, "this Longhorn has no instance-manager upgrader of its own")
	}
	msg := "Longhorn's own instance-manager upgrader is off and idle"
	if len(u.Settings) > 0 {
		msg += " (" + strings.Join(slices.Sorted(maps.Keys(u.Settings)), ", ") + ")"
	}
	return pass(NoOtherUpgrader, "%s", msg)
}

// settingOnForV2 reads an automatic-upgrade setting's value: a boolean for
// every data engine, or a JSON object of booleans (as strings or not) by
// data engine, which must say v2.
func settingOnForV2(value string) (bool, error) {
	v := strings.TrimSpace(value)
	if b, err := strconv.ParseBool(v); err == nil {
		return b, nil
	}
	var byEngine map[string]any
	if err := json.Unmarshal([]byte(v), &byEngine); err != nil {
		return false, errors.New("not a boolean nor a JSON object") // the parser's detail helps no operator
	}
	x, ok := byEngine[dataplane.DataEngineV2]
	if !ok {
		// What Longhorn makes of a missing engine is not established:
		// refused, like any value that does not say.
		return false, fmt.Errorf("no %q in it", dataplane.DataEngineV2)
	}
	switch x := x.(type) {
	case bool:
		return x, nil
	case string:
		b, err := strconv.ParseBool(x)
		if err != nil {
			return false, fmt.Errorf("v2 is %q", x)
		}
		return b, nil
	default:
		return false, fmt.Errorf("v2 is %v", x)
	}
}

// turnOff says how to turn an automatic-upgrade setting off for v2: set it
// to "false", or set v2 to "false" in its per-data-engine JSON object.
func turnOff(value string) string {
	if _, err := strconv.ParseBool(strings.TrimSpace(value)); err == nil {
		return `set it to "false"`
	}
	return `set "v2" to "false" in it`
}

func orUnknown(s string) string {
	if s == "" {
		return "in an unknown state"
	}
	return s
}
