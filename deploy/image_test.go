package deploy

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/internal/ociimage"
)

// pinned is an image reference by name, tag and digest.
var pinned = regexp.MustCompile(`^[^@\s]+:[^@\s]+@sha256:[0-9a-f]{64}$`)

// TestImagesAreTheDocumentedOnes: the controller and the workers run the
// image `make image` builds, under its documented name, tagged with the
// release in VERSION (what `make image` tags a release commit with) and
// pinned by digest (what `make image-push` pushed: hack/image --pin), like
// every other image of the install, so that a tag moved in the registry
// changes nothing that runs.
func TestImagesAreTheDocumentedOnes(t *testing.T) {
	raw, err := os.ReadFile(repoPath(t, "VERSION"))
	require.NoError(t, err)
	want := ociimage.DefaultRegistry + "/" + ociimage.SwitchbackName + ":" + strings.TrimSpace(string(raw)) + "@"
	m := render(t, repoPath(t, "deploy"))
	for _, name := range []string{controllerName, workerName} {
		assert.True(t, strings.HasPrefix(m.workload(t, name).container(t).Image, want), "%s runs %s, want %s<digest>", name, m.workload(t, name).container(t).Image, want)
	}
	for _, w := range m.workloads(t) {
		for _, c := range append(w.pod.Spec.InitContainers, w.pod.Spec.Containers...) {
			assert.Regexp(t, pinned, c.Image, "%s's container %s: an image by tag and digest", w.name, c.Name)
		}
	}
}
