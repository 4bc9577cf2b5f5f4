package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/switchback-dev/switchback/dataplane"
)

// version is Switchback's version, set at build time by `make build` and
// `make image` (-ldflags "-X main.version=..."); empty in a plain go build.
var version string

// versionInfo is what `switchback version` prints.
type versionInfo struct {
	Version   string   `json:"version"`
	Commit    string   `json:"commit,omitempty"`
	Modified  bool     `json:"modified,omitempty"`
	Go        string   `json:"go"`
	Platform  string   `json:"platform"`
	Longhorn  []string `json:"longhorn"`
	NATSBuilt string   `json:"natsServer,omitempty"`
}

func versionCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "version", Args: noArgs}
	fs := cmd.Flags()
	output := fs.StringP("output", "o", "text", "output format: text or json")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		stdout := cmd.OutOrStdout()
		v := currentVersion()
		switch *output {
		case "json":
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(v)
		case "text":
			commit := v.Commit
			if commit == "" {
				commit = "unknown (built without VCS stamping)"
			}
			if v.Modified {
				commit += " (modified)"
			}
			fmt.Fprintf(stdout, "switchback %s\ncommit:     %s\ngo:         %s %s\nlonghorn:   %v\nnats-server: %s (embedded)\n",
				v.Version, commit, v.Go, v.Platform, v.Longhorn, v.NATSBuilt)
			return nil
		}
		return fmt.Errorf("-o %q: want text or json: %w", *output, errUsage)
	}
	return cmd
}

// currentVersion reads the build: the version stamped at build time, the
// commit Go's VCS stamping recorded, and the Longhorn profiles the data
// plane drives.
func currentVersion() versionInfo {
	v := versionInfo{Version: version, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if v.Version == "" {
		v.Version = "(devel)"
	}
	for _, p := range dataplane.Profiles {
		name := string(p)
		if p.Experimental() {
			name += " (experimental)"
		}
		v.Longhorn = append(v.Longhorn, name)
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Commit = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
		for _, d := range bi.Deps {
			if d.Path == "github.com/nats-io/nats-server/v2" {
				v.NATSBuilt = d.Version
			}
		}
	}
	return v
}
