package dataplane

// Names of Longhorn's own instance-manager upgrader (the Longhorn releases
// that have one): the settings that switch it on. Two names exist for the
// same switch across Longhorn's drafts; either may be served.
const (
	// SettingIMAutoUpgrade is the later name; its value may be per data
	// engine (a JSON object such as {"v1":"false","v2":"true"}).
	SettingIMAutoUpgrade = "allow-instance-manager-automatic-upgrade"
	// SettingV2IMAutoUpgrade is the first name, a plain "true" or "false".
	SettingV2IMAutoUpgrade = "allow-v2-instance-manager-automatic-upgrade"
)

// AutoUpgradeSettings lists the settings that switch Longhorn's own
// upgrader on, in the order they are reported.
var AutoUpgradeSettings = []string{SettingIMAutoUpgrade, SettingV2IMAutoUpgrade}

// States of Longhorn's per-node instance-manager upgrade objects and of the
// nodes of its upgrade control that mean "over".
const (
	UpgraderStateCompleted = "completed"
	UpgraderStateFailed    = "failed"
	// UpgraderNodeInProgress is a node of the upgrade control being upgraded.
	UpgraderNodeInProgress = "in-progress"
)

// LonghornUpgrader is what Longhorn's own instance-manager upgrader shows:
// the settings that switch it on and the state of its objects. It is zero
// on a Longhorn without one. Whether it may race Switchback is decided from
// it by precheck.OtherUpgrader, not here.
type LonghornUpgrader struct {
	// Settings holds those of AutoUpgradeSettings that exist, by name, with
	// their raw value.
	Settings map[string]string
	// Controls are its upgrade-control objects (a singleton in Longhorn).
	Controls []UpgradeControl
	// Upgrades are its per-node instance-manager upgrade objects.
	Upgrades []IMUpgrade
}

// UpgradeControl is one upgrade-control object: the cycle over the nodes.
type UpgradeControl struct {
	Name string
	// CurrentNode is the node the cycle is on, "" when none.
	CurrentNode string
	// Nodes maps each node of the cycle to its state (pending, in-progress,
	// completed, failed).
	Nodes map[string]string
}

// IMUpgrade is one per-node instance-manager upgrade object.
type IMUpgrade struct {
	Name, Node string
	// State is its phase (pending, relocating-engines, …); completed and
	// failed are over.
	State string
}

// Over reports whether the upgrade object has ended.
func (u IMUpgrade) Over() bool {
	return u.State == UpgraderStateCompleted || u.State == UpgraderStateFailed
}
