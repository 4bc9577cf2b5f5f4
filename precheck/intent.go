package precheck

import (
	"slices"
	"strings"

	"github.com/switchback-dev/switchback/dataplane"
)

// CheckDataEngineSupported passes when spec.dataEngine is v2: only the v2
// engine runs every engine and replica of a node in one instance manager that
// an upgrade can replace while targets move away.
func CheckDataEngineSupported(in Input) Result {
	if in.DataEngine != dataplane.DataEngineV2 {
		return fail(DataEngineSupported, ReasonUnsupportedDataEngine,
			"data engine %q is not supported: only %q can be upgraded live", in.DataEngine, dataplane.DataEngineV2)
	}
	return pass(DataEngineSupported, "data engine %q is supported", in.DataEngine)
}

// CheckSingleActiveUpgrade passes when no other manager is active. Two
// upgrades at once could pick each other's nodes as temporary targets while
// replacing their instance managers.
func CheckSingleActiveUpgrade(in Input) Result {
	active := sortedUnique(in.ActiveUpgrades)
	if len(active) > 0 {
		return fail(SingleActiveUpgrade, ReasonAnotherUpgradeActive,
			"another upgrade is active: %s; wait until it completes or delete it", strings.Join(active, ", "))
	}
	return pass(SingleActiveUpgrade, "no other upgrade is active")
}

// sortedUnique returns names sorted without duplicates, empty names shown as
// "" so that they are visible in a message.
func sortedUnique(names []string) []string {
	out := slices.Clone(names)
	for i, n := range out {
		if n == "" {
			out[i] = `""`
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
