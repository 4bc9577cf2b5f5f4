package deploy

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/internal/ociimage"
)

// TestImagesAreTheDocumentedOnes: the controller and the workers run the
// image `make image` builds, under its documented name, tagged with the
// release in VERSION (what `make image` tags a release commit with).
func TestImagesAreTheDocumentedOnes(t *testing.T) {
	raw, err := os.ReadFile(repoPath(t, "VERSION"))
	require.NoError(t, err)
	want := ociimage.DefaultRegistry + "/" + ociimage.SwitchbackName + ":" + strings.TrimSpace(string(raw))
	m := render(t, repoPath(t, "deploy"))
	for _, name := range []string{controllerName, workerName} {
		assert.Equal(t, want, m.workload(t, name).container(t).Image, name)
	}
}
