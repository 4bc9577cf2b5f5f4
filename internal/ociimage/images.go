package ociimage

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// DefaultRegistry is where the documented image names live
// (docs/install.md); `make image-push REGISTRY=...` pushes elsewhere.
const DefaultRegistry = "ghcr.io/switchback-dev"

// The image names under a registry.
const (
	SwitchbackName = "switchback"
	NATSName       = "switchback-nats"
)

// NATSModule is the module nats-server is built from: the version the
// module's go.mod requires, which every test runs embedded.
const NATSModule = "github.com/nats-io/nats-server/v2"

// Source is the project's repository, for the source label.
const Source = "https://github.com/switchback-dev/switchback"

// Switchback is the spec of Switchback's image of the module at root:
// version (git describe) and revision (the commit) go into its labels,
// created is the commit's time.
func Switchback(root, version, revision string, created time.Time) Spec {
	return Spec{
		Binaries:   map[string]Binary{"switchback": {Dir: root, Package: "./cmd/switchback", LDFlags: []string{"-X", "main.version=" + version}}},
		Entrypoint: []string{"/usr/bin/switchback"},
		Created:    created,
		Labels: map[string]string{
			"org.opencontainers.image.title":       SwitchbackName,
			"org.opencontainers.image.description": "Switchback: live upgrades of Longhorn's V2 data engine, node by node",
			"org.opencontainers.image.version":     version,
			"org.opencontainers.image.revision":    revision,
			"org.opencontainers.image.source":      Source,
			"org.opencontainers.image.created":     created.UTC().Format(time.RFC3339),
		},
	}
}

// NATS is the spec of the bundled NATS server's image: nats-server at the
// version the module at root requires, and httpprobe for the probes (the
// monitoring port listens on loopback only, where the kubelet cannot
// reach). It depends on no commit of this repository but httpprobe's
// sources: its time is the nats-server release's, and its digest is what
// deploy/nats pins. It returns the nats-server version too.
func NATS(ctx context.Context, root string) (Spec, string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-json", NATSModule)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return Spec{}, "", fmt.Errorf("ociimage: go list -m %s: %w", NATSModule, err)
	}
	var m struct {
		Version string
		Time    time.Time
	}
	if err := json.Unmarshal(out, &m); err != nil || m.Version == "" || m.Time.IsZero() {
		return Spec{}, "", fmt.Errorf("ociimage: go list -m %s: no version and time in %q (%v)", NATSModule, out, err)
	}
	version := strings.TrimPrefix(m.Version, "v")
	return Spec{
		Binaries: map[string]Binary{
			"nats-server": {Dir: root, Package: NATSModule},
			"httpprobe":   {Dir: root, Package: "./cmd/httpprobe"},
		},
		Entrypoint: []string{"/usr/bin/nats-server"},
		Created:    m.Time,
		Labels: map[string]string{
			"org.opencontainers.image.title":       NATSName,
			"org.opencontainers.image.description": "nats-server " + m.Version + " built from its Go module as Switchback's tests run it, with httpprobe for the probes",
			"org.opencontainers.image.version":     version,
			"org.opencontainers.image.source":      "https://github.com/nats-io/nats-server",
			"org.opencontainers.image.licenses":    "Apache-2.0",
			"org.opencontainers.image.created":     m.Time.UTC().Format(time.RFC3339),
		},
	}, version, nil
}
