package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/switchback-dev/switchback/internal/ociimage"
)

// pinFile is one place a digest is recorded: the file (from the repository
// root) and the pattern whose first group is the digest to replace.
type pinFile struct {
	path    string
	pattern *regexp.Regexp
}

// digestRE is an image digest as registries name it.
const digestRE = `sha256:[0-9a-f]{64}`

// pins are where the manifests name each image by digest: the kustomize
// base (the images transformer for the switchback image, the
// StatefulSet's image for the servers) and the chart's values.
var pins = map[string][]pinFile{
	ociimage.SwitchbackName: {
		{filepath.Join("deploy", "kustomization.yaml"), regexp.MustCompile(`(?m)^- name: ` + regexp.QuoteMeta(ociimage.DefaultRegistry+"/"+ociimage.SwitchbackName) + `\n  newTag: [^\n]*\n  digest: (` + digestRE + `)$`)},
		{filepath.Join("deploy", "chart", "switchback", "values.yaml"), regexp.MustCompile(`(?m)^image:\n  repository: [^\n]*\n  tag: [^\n]*\n  digest: (` + digestRE + `)$`)},
	},
	ociimage.NATSName: {
		{filepath.Join("deploy", "nats", "statefulset.yaml"), regexp.MustCompile(`image: ` + regexp.QuoteMeta(ociimage.DefaultRegistry+"/"+ociimage.NATSName) + `:[^@\s]+@(` + digestRE + `)`)},
		{filepath.Join("deploy", "chart", "switchback", "values.yaml"), regexp.MustCompile(`(?m)^    repository: ` + regexp.QuoteMeta(ociimage.DefaultRegistry+"/"+ociimage.NATSName) + `\n    tag: [^\n]*\n    digest: (` + digestRE + `)$`)},
	},
}

// pinnable refuses to pin a switchback image whose tag is not the release
// in VERSION, which the manifests name: a development build's digest under
// the release's tag would run other code than the tag says.
func pinnable(root, image, tag string) error {
	if image != ociimage.SwitchbackName {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		return fmt.Errorf("pin %s: the release version: %w", image, err)
	}
	if release := strings.TrimSpace(string(b)); tag != release {
		return fmt.Errorf("pin %s: the image is tagged %s, the manifests name the release %s: pin a release build (on its tagged commit, or --version %s)", image, tag, release, release)
	}
	return nil
}

// pin records digest as image's in every file of pins under root: each
// must hold exactly one pin of it, so a manifest moved or reworded fails
// here instead of shipping unpinned.
func pin(root, image, digest string) error {
	if !regexp.MustCompile(`^` + digestRE + `$`).MatchString(digest) {
		return fmt.Errorf("pin %s: %q is not a sha256 digest", image, digest)
	}
	files, ok := pins[image]
	if !ok {
		return fmt.Errorf("pin %s: no manifest names this image", image)
	}
	for _, f := range files {
		path := filepath.Join(root, f.path)
		raw, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("pin %s: %w", image, err)
		}
		m := f.pattern.FindAllSubmatchIndex(raw, -1)
		if len(m) != 1 {
			return fmt.Errorf("pin %s: %s holds %d pins of it, want 1 (pattern %s)", image, f.path, len(m), f.pattern)
		}
		start, end := m[0][2], m[0][3]
		out := append(append(append([]byte{}, raw[:start]...), digest...), raw[end:]...)
		if err := os.WriteFile(path, out, 0o644); err != nil {
			return fmt.Errorf("pin %s: %w", image, err)
		}
	}
	return nil
}
