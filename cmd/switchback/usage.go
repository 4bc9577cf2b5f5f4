package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Help sections of the flags, in the order the help lists them after the
// command's own flags.
const (
	flagsKubernetes = "Kubernetes"
	flagsDataPlane  = "Data plane"
	flagsSimulated  = "Simulated cluster"
	flagsNATS       = "NATS"
	flagsEmbedded   = "Embedded NATS"
	flagsVerify     = "Verify"
	flagsHealth     = "Health and metrics"
	flagsLogging    = "Logging"
)

var flagSections = []string{flagsKubernetes, flagsDataPlane, flagsSimulated, flagsNATS, flagsEmbedded, flagsVerify, flagsHealth, flagsLogging}

// flagSectionAnnotation names the help section a flag is listed under.
const flagSectionAnnotation = "switchback.io/help-section"

// inSection lists the flags register adds under section in the help.
func inSection(fs *pflag.FlagSet, section string, register func()) {
	before := map[string]bool{}
	fs.VisitAll(func(f *pflag.Flag) { before[f.Name] = true })
	register()
	fs.VisitAll(func(f *pflag.Flag) {
		if !before[f.Name] {
			// The flag was just added: SetAnnotation cannot fail.
			_ = fs.SetAnnotation(f.Name, flagSectionAnnotation, []string{section})
		}
	})
}

// setGroupedUsage gives every command a usage that lists its flags by
// section (the command's own first), as kubectl and helm group theirs.
func setGroupedUsage(root *cobra.Command) {
	root.SetUsageFunc(func(c *cobra.Command) error {
		writeUsage(c.OutOrStderr(), c)
		return nil
	})
}

func writeUsage(w io.Writer, c *cobra.Command) {
	fmt.Fprintf(w, "Usage:\n  %s\n", useLine(c))
	if c.HasAvailableSubCommands() {
		writeSubcommands(w, c)
	}
	if c.HasExample() {
		fmt.Fprintf(w, "\nExamples:\n%s\n", c.Example)
	}
	sections := map[string]*pflag.FlagSet{}
	own := pflag.NewFlagSet(c.Name(), pflag.ContinueOnError)
	c.LocalFlags().VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		set := own
		if s := f.Annotations[flagSectionAnnotation]; len(s) == 1 {
			if sections[s[0]] == nil {
				sections[s[0]] = pflag.NewFlagSet(s[0], pflag.ContinueOnError)
			}
			set = sections[s[0]]
		}
		set.AddFlag(f)
	})
	if own.HasFlags() {
		fmt.Fprintf(w, "\nFlags:\n%s", own.FlagUsagesWrapped(100))
	}
	for _, s := range flagSections {
		if set := sections[s]; set != nil {
			fmt.Fprintf(w, "\n%s flags:\n%s", s, set.FlagUsagesWrapped(100))
		}
	}
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(w, "\nUse \"%s [command] --help\" for more information about a command.\n", c.CommandPath())
	}
}

// useLine is cobra's, with [flags] said once.
func useLine(c *cobra.Command) string {
	if c.HasAvailableSubCommands() && !c.Runnable() {
		return c.CommandPath() + " [command]"
	}
	return c.UseLine()
}

func writeSubcommands(w io.Writer, c *cobra.Command) {
	width := 0
	for _, sub := range c.Commands() {
		width = max(width, len(sub.Name()))
	}
	list := func(title, group string) {
		var lines []string
		for _, sub := range c.Commands() {
			if sub.GroupID == group && (sub.IsAvailableCommand() || sub.Name() == "help") {
				lines = append(lines, fmt.Sprintf("  %-*s  %s", width, sub.Name(), sub.Short))
			}
		}
		if len(lines) > 0 {
			fmt.Fprintf(w, "\n%s\n%s\n", title, strings.Join(lines, "\n"))
		}
	}
	for _, g := range c.Groups() {
		list(g.Title, g.ID)
	}
	list("Other commands:", "")
}

// hideUnless hides the flags of section from c's help unless shown() says
// they apply (it reads the flags given with --help): the simulator's flags
// are noise to whoever plans a real cluster's upgrade. Hidden flags are
// still accepted.
func hideUnless(c *cobra.Command, section string, shown func() bool) {
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if s := f.Annotations[flagSectionAnnotation]; len(s) == 1 && s[0] == section {
			f.Hidden = true
		}
	})
	c.SetHelpFunc(func(c *cobra.Command, args []string) {
		if shown() {
			c.Flags().VisitAll(func(f *pflag.Flag) {
				if s := f.Annotations[flagSectionAnnotation]; len(s) == 1 && s[0] == section {
					f.Hidden = false
				}
			})
		}
		c.Root().HelpFunc()(c, args)
	})
}
