// Command image builds Switchback's OCI images with no container daemon
// (package internal/ociimage): `make image` and `make image-push`.
//
//	go run ./hack/image [--registry R] [--version V] [--out DIR] [--platforms linux/amd64,linux/arm64] [--push] [--pin] [--only switchback|switchback-nats]
//
// Each image becomes an OCI layout (DIR/<name>, `skopeo`/`crane`/`oras`
// read it) and a `docker load` tarball of the build machine's platform
// (DIR/<name>.tar); --push pushes the indexes with the local Docker
// credentials; --pin records each digest where the manifests name the
// image. It prints each image's reference and digest.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/switchback-dev/switchback/internal/ociimage"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	registry := fs.String("registry", ociimage.DefaultRegistry, "registry and path the images are named under")
	version := fs.String("version", "", "Switchback's version, the tag of its image (default: `git describe --tags --match 'v*' --dirty` on a release, else VERSION-dev.<commit>)")
	out := fs.String("out", filepath.Join(".cache", "image"), "directory for the OCI layouts and tarballs")
	platforms := fs.String("platforms", platformList(ociimage.Platforms), "comma-separated os/arch list")
	push := fs.Bool("push", false, "push the images to --registry")
	pinDigests := fs.Bool("pin", false, "record each image's digest where the manifests name it (deploy/ and the chart's values): a release pins what it pushed")
	only := fs.String("only", "", "build only this image ("+ociimage.SwitchbackName+" or "+ociimage.NATSName+")")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ps, err := parsePlatforms(*platforms)
	if err != nil {
		return err
	}
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	type build struct {
		name, tag string
		spec      ociimage.Spec
	}
	var builds []build
	if *only == "" || *only == ociimage.SwitchbackName {
		v, rev, created, err := gitVersion(ctx, root)
		if err != nil {
			return err
		}
		if *version != "" {
			v = *version
		}
		builds = append(builds, build{ociimage.SwitchbackName, v, ociimage.Switchback(root, v, rev, created)})
	}
	if *only == "" || *only == ociimage.NATSName {
		spec, v, err := ociimage.NATS(ctx, root)
		if err != nil {
			return err
		}
		builds = append(builds, build{ociimage.NATSName, v, spec})
	}
	if len(builds) == 0 {
		return fmt.Errorf("--only %q: not an image", *only)
	}
	host := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	for _, b := range builds {
		b.spec.Platforms = ps
		idx, err := ociimage.Build(ctx, b.spec)
		if err != nil {
			return err
		}
		digest, err := idx.Digest()
		if err != nil {
			return err
		}
		ref := *registry + "/" + b.name + ":" + b.tag
		if err := ociimage.WriteLayout(filepath.Join(*out, b.name), idx, ref); err != nil {
			return err
		}
		tarPath := filepath.Join(*out, b.name+".tar")
		if err := ociimage.WriteDockerTarball(tarPath, idx, ref, host); err != nil && !strings.Contains(err.Error(), "no image for") {
			return err
		}
		fmt.Fprintf(stdout, "%s@%s\n  layout %s, docker load -i %s\n", ref, digest, filepath.Join(*out, b.name), tarPath)
		if *push {
			if err := ociimage.Push(ctx, idx, ref); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "  pushed %s@%s\n", ref, digest)
		}
		if *pinDigests {
			if err := pinnable(root, b.name, b.tag); err != nil {
				return err
			}
			if err := pin(root, b.name, digest.String()); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "  pinned %s in the manifests\n", digest)
		}
	}
	return nil
}

// gitVersion is the image's version, the commit and its time: on a release
// (a commit tagged v*) `git describe --tags --match 'v*' --dirty`, the
// release VERSION names; else VERSION-dev.<short commit>[.dirty], a
// pre-release of it. Outside a git checkout: VERSION-dev, no revision and
// the Unix epoch.
func gitVersion(ctx context.Context, root string) (version, revision string, created time.Time, err error) {
	git := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = root
		b, err := cmd.Output()
		return strings.TrimSpace(string(b)), err
	}
	b, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		return "", "", time.Time{}, fmt.Errorf("the release version: %w", err)
	}
	release := strings.TrimSpace(string(b))
	if revision, err = git("rev-parse", "HEAD"); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) || errors.Is(err, exec.ErrNotFound) {
			return release + "-dev", "", time.Unix(0, 0), nil
		}
		return "", "", time.Time{}, err
	}
	if version, err = git("describe", "--tags", "--match", "v*", "--exact-match", "--dirty"); err != nil {
		version = release + "-dev." + revision[:12]
		if dirty, _ := git("status", "--porcelain", "--untracked-files=no"); dirty != "" {
			version += ".dirty"
		}
	}
	ct, err := git("log", "-1", "--format=%ct")
	if err != nil {
		return "", "", time.Time{}, err
	}
	sec, err := strconv.ParseInt(ct, 10, 64)
	if err != nil {
		return "", "", time.Time{}, fmt.Errorf("commit time %q: %w", ct, err)
	}
	return version, revision, time.Unix(sec, 0), nil
}

func platformList(ps []v1.Platform) string {
	var s []string
	for _, p := range ps {
		s = append(s, p.OS+"/"+p.Architecture)
	}
	return strings.Join(s, ",")
}

func parsePlatforms(s string) ([]v1.Platform, error) {
	var out []v1.Platform
	for _, p := range strings.Split(s, ",") {
		osName, arch, ok := strings.Cut(strings.TrimSpace(p), "/")
		if !ok || osName != "linux" || arch == "" {
			return nil, fmt.Errorf("--platforms: %q is not linux/<arch>", p)
		}
		out = append(out, v1.Platform{OS: osName, Architecture: arch})
	}
	return out, nil
}
