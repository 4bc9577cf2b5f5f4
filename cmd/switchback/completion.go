package main

import (
	"github.com/spf13/cobra"

	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/natsauth"
)

// completeValues offers values for flag in shell completion (cobra's
// `completion` command writes the scripts).
func completeValues(c *cobra.Command, flag string, values ...string) {
	// The flag is the command's own: registration cannot fail.
	_ = c.RegisterFlagCompletionFunc(flag, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
}

// completeFlagValues offers the values of the flags that take a fixed set,
// wherever a command has them.
func completeFlagValues(root *cobra.Command) {
	for _, c := range root.Commands() {
		fixed := map[string][]string{
			"data-plane":       {"longhorn", "sim"},
			"initiator-policy": {string(v1beta2.InitiatorPolicyWait), string(v1beta2.InitiatorPolicyMoveWorkloads)},
			"log-level":        {"debug", "info", "warn", "error"},
			"log-format":       {"text", "json"},
			"longhorn-profile": dataplane.ProfileNames(),
			"mode":             {string(natsauth.ModeNKey), string(natsauth.ModePassword)},
			"output":           {"table", "json", "yaml"},
		}
		if c.Name() == "version" {
			fixed["output"] = []string{"text", "json"}
		}
		for name, values := range fixed {
			if c.Flags().Lookup(name) != nil {
				completeValues(c, name, values...)
			}
		}
	}
}

// pluginCompletionName is the executable kubectl runs to complete
// `kubectl switchback ...`: kubectl calls it with the words typed so far.
const pluginCompletionName = "kubectl_complete-switchback"
