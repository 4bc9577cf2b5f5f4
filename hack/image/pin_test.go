package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/internal/ociimage"
)

// TestPinRecordsTheDigestEverywhere: --pin rewrites exactly the digests of
// the image it built, in every manifest that names it, and refuses a
// manifest where it finds no pin (moved or reworded) rather than ship an
// image unpinned.
func TestPinRecordsTheDigestEverywhere(t *testing.T) {
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	root := t.TempDir()
	before := map[string]string{}
	pinned := map[string]string{} // the repository's digest of each image
	for image, files := range pins {
		for _, f := range files {
			raw, err := os.ReadFile(filepath.Join(repo, f.path))
			require.NoError(t, err)
			m := f.pattern.FindSubmatch(raw)
			require.NotNil(t, m, "%s pins %s", f.path, image)
			pinned[image] = string(m[1])
			require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(root, f.path)), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(root, f.path), raw, 0o644))
			before[f.path] = string(raw)
		}
	}
	require.NotEqual(t, pinned[ociimage.SwitchbackName], pinned[ociimage.NATSName])
	fresh := map[string]string{ociimage.SwitchbackName: "sha256:" + strings.Repeat("1a", 32), ociimage.NATSName: "sha256:" + strings.Repeat("2b", 32)}
	for image, digest := range fresh {
		require.NoError(t, pin(root, image, digest))
	}
	for path, text := range before {
		for image, digest := range fresh {
			text = strings.ReplaceAll(text, pinned[image], digest)
		}
		after, err := os.ReadFile(filepath.Join(root, path))
		require.NoError(t, err)
		assert.Equal(t, text, string(after), "%s: every pin, and nothing else, changed", path)
	}

	assert.ErrorContains(t, pin(root, ociimage.SwitchbackName, "latest"), "not a sha256 digest")
	release, err := os.ReadFile(filepath.Join(repo, "VERSION"))
	require.NoError(t, err)
	assert.NoError(t, pinnable(repo, ociimage.SwitchbackName, strings.TrimSpace(string(release))))
	assert.ErrorContains(t, pinnable(repo, ociimage.SwitchbackName, strings.TrimSpace(string(release))+"-dev.0123abcd"), "pin a release build")
	assert.NoError(t, pinnable(repo, ociimage.NATSName, "2.15.2"), "the servers' tag is nats-server's version")
	assert.ErrorContains(t, pin(root, "other", fresh[ociimage.NATSName]), "no manifest names this image")
	require.NoError(t, os.WriteFile(filepath.Join(root, "deploy", "kustomization.yaml"), []byte("images: []\n"), 0o644))
	assert.ErrorContains(t, pin(root, ociimage.SwitchbackName, fresh[ociimage.SwitchbackName]), "deploy/kustomization.yaml holds 0 pins of it, want 1")
}
