package ociimage

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Toolchain is the Go toolchain every binary is built with (GOTOOLCHAIN):
// the digests depend on it, so it is pinned, and a machine with another Go
// fetches this one from the module proxy.
const Toolchain = "go1.26.8"

// Binary is a static Go binary to build: Package (a main package path) in
// the module at Dir.
type Binary struct {
	Dir     string
	Package string
	// LDFlags are added to the ones every build gets (-s -w -buildid=).
	LDFlags []string
}

// build compiles b for platform and returns the binary.
func (b Binary) build(ctx context.Context, platform v1.Platform) ([]byte, error) {
	tmp, err := os.MkdirTemp("", "ociimage-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	out := filepath.Join(tmp, "bin")
	ld := append([]string{"-s", "-w", "-buildid="}, b.LDFlags...)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-mod=readonly",
		"-ldflags="+strings.Join(ld, " "), "-o", out, b.Package)
	cmd.Dir = b.Dir
	// GOFLAGS and GOAMD64-style settings of the caller's environment would
	// change the bytes: each is set here.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+platform.OS, "GOARCH="+platform.Architecture,
		"GOTOOLCHAIN="+Toolchain, "GOFLAGS=", "GOAMD64=v1", "GOARM64=v8.0", "GOEXPERIMENT=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("ociimage: go build %s for %s/%s: %w\n%s", b.Package, platform.OS, platform.Architecture, err, stderr.String())
	}
	return os.ReadFile(out)
}
