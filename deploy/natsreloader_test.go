package deploy

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNATSServersReloadTheirConfiguration: each NATS pod runs the reloader
// beside the server, in a shared process namespace (it signals the server),
// watching exactly the directory the server reads its configuration from,
// read-only, with the switchback image of the install, and no more
// privilege than the server.
func TestNATSServersReloadTheirConfiguration(t *testing.T) {
	m := render(t, repoPath(t, "deploy"))
	w := m.workload(t, "switchback-nats")
	spec := w.pod.Spec
	require.NotNil(t, spec.ShareProcessNamespace)
	assert.True(t, *spec.ShareProcessNamespace, "the reloader signals the server")
	require.Len(t, spec.Containers, 2)
	server, reloader := spec.Containers[0], spec.Containers[1]
	assert.Equal(t, "reloader", reloader.Name)
	assert.Equal(t, m.workload(t, controllerName).container(t).Image, reloader.Image, "the install's switchback image")
	require.GreaterOrEqual(t, len(reloader.Args), 2)
	assert.Equal(t, "nats-reloader", reloader.Args[0])
	var watch []string
	for _, a := range reloader.Args {
		if v, ok := strings.CutPrefix(a, "--watch="); ok {
			watch = append(watch, v)
		}
	}
	assert.Equal(t, []string{"/etc/nats"}, watch)
	assert.Contains(t, server.Args, "/etc/nats/nats.conf", "the server reads its configuration under the watched directory")
	require.Len(t, reloader.VolumeMounts, 1)
	assert.Equal(t, "config", reloader.VolumeMounts[0].Name)
	assert.Equal(t, "/etc/nats", reloader.VolumeMounts[0].MountPath)
	assert.True(t, reloader.VolumeMounts[0].ReadOnly)
	assert.Equal(t, server.SecurityContext, reloader.SecurityContext, "no more privilege than the server")
}
