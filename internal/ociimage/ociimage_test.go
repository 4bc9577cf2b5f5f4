package ociimage_test

import (
	"archive/tar"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/switchback-dev/switchback/internal/ociimage"
	"github.com/switchback-dev/switchback/natsembed"
)

var host = v1.Platform{OS: "linux", Architecture: runtime.GOARCH}

func root(t *testing.T) string {
	t.Helper()
	r, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	return r
}

// entry is one file of an image's filesystem.
type entry struct {
	hdr  *tar.Header
	data []byte
}

// files is img's filesystem, by path.
func files(t *testing.T, img v1.Image) map[string]entry {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	out := map[string]entry{}
	r := tar.NewReader(rc)
	for {
		h, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		b, err := io.ReadAll(r)
		require.NoError(t, err)
		out["/"+strings.TrimSuffix(h.Name, "/")] = entry{h, b}
	}
}

// binary writes the file at p of img to a temporary executable.
func binary(t *testing.T, img v1.Image, p string) string {
	t.Helper()
	e, ok := files(t, img)[p]
	require.True(t, ok, "%s in the image", p)
	out := filepath.Join(t.TempDir(), filepath.Base(p))
	require.NoError(t, os.WriteFile(out, e.data, 0o755))
	return out
}

// TestSwitchbackImage builds Switchback's image twice: the same digest; a
// static binary at the entrypoint, the CA bundle, the non-root user, the
// labels; the layout and the docker tarball hold the same image.
func TestSwitchbackImage(t *testing.T) {
	ctx := context.Background()
	created := time.Unix(1_800_000_000, 0)
	spec := ociimage.Switchback(root(t), "v0.0.0-test", "0123abcd", created)
	spec.Platforms = []v1.Platform{host}
	first, err := ociimage.Build(ctx, spec)
	require.NoError(t, err)
	second, err := ociimage.Build(ctx, spec)
	require.NoError(t, err)
	d1, err := first.Digest()
	require.NoError(t, err)
	d2, err := second.Digest()
	require.NoError(t, err)
	assert.Equal(t, d1, d2, "two builds, one digest")

	img, err := ociimage.Platform(first, host)
	require.NoError(t, err)
	cf, err := img.ConfigFile()
	require.NoError(t, err)
	assert.Equal(t, "65532:65532", cf.Config.User)
	assert.Equal(t, []string{"/usr/bin/switchback"}, cf.Config.Entrypoint)
	assert.Equal(t, created.UTC(), cf.Created.Time.UTC())
	assert.Equal(t, "v0.0.0-test", cf.Config.Labels["org.opencontainers.image.version"])
	assert.Equal(t, "0123abcd", cf.Config.Labels["org.opencontainers.image.revision"])
	assert.Equal(t, ociimage.Source, cf.Config.Labels["org.opencontainers.image.source"])

	fs := files(t, img)
	for p, e := range fs {
		assert.Equal(t, created.UTC(), e.hdr.ModTime.UTC(), "%s's time", p)
	}
	sb := fs["/usr/bin/switchback"]
	assert.EqualValues(t, 0o755, sb.hdr.Mode)
	assert.Equal(t, byte(0x7f), sb.data[0], "an ELF binary")
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(fs[ociimage.CABundlePath].data), "the CA bundle is PEM")
	assert.Greater(t, len(fs[ociimage.CABundlePath].data), 100_000, "the whole NSS bundle")
	assert.Contains(t, string(fs["/etc/passwd"].data), "nonroot:x:65532:65532:")
	assert.EqualValues(t, 0o1777, fs["/tmp"].hdr.Mode&0o7777)
	assert.Equal(t, ociimage.NonRoot, fs["/home/nonroot"].hdr.Uid)

	out, err := exec.Command(binary(t, img, "/usr/bin/switchback"), "help").CombinedOutput()
	if err != nil { // help may exit with the usage code; it must have run
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "%s", out)
	}
	assert.Contains(t, string(out), "controller", "the image's binary runs: %s", out)

	dir := t.TempDir()
	require.NoError(t, ociimage.WriteLayout(filepath.Join(dir, "layout"), first, "example.com/switchback:v0.0.0-test"))
	lp, err := layout.FromPath(filepath.Join(dir, "layout"))
	require.NoError(t, err)
	outer, err := lp.ImageIndex()
	require.NoError(t, err)
	im, err := outer.IndexManifest()
	require.NoError(t, err)
	require.Len(t, im.Manifests, 1)
	assert.Equal(t, d1, im.Manifests[0].Digest, "the layout holds the index built")
	assert.Equal(t, "example.com/switchback:v0.0.0-test", im.Manifests[0].Annotations["org.opencontainers.image.ref.name"])

	tarPath := filepath.Join(dir, "switchback.tar")
	require.NoError(t, ociimage.WriteDockerTarball(tarPath, first, "example.com/switchback:v0.0.0-test", host))
	loaded, err := tarball.ImageFromPath(tarPath, nil)
	require.NoError(t, err)
	c1, err := img.ConfigName()
	require.NoError(t, err)
	c2, err := loaded.ConfigName()
	require.NoError(t, err)
	assert.Equal(t, c1, c2, "docker load gets the same image")
	assert.Error(t, ociimage.WriteDockerTarball(tarPath, first, "example.com/switchback:v0.0.0-test", v1.Platform{OS: "linux", Architecture: "s390x"}))

	// make image-push: a registry (here an in-process one) stores the very
	// index built, so the digest the manifests pin is the pushed one.
	reg := httptest.NewServer(registry.New())
	defer reg.Close()
	ref := strings.TrimPrefix(reg.URL, "http://") + "/switchback-dev/switchback:v0.0.0-test"
	require.NoError(t, ociimage.Push(context.Background(), first, ref))
	r, err := name.ParseReference(ref)
	require.NoError(t, err)
	pushed, err := remote.Index(r)
	require.NoError(t, err)
	pd, err := pushed.Digest()
	require.NoError(t, err)
	assert.Equal(t, d1, pd, "the registry serves the digest built")
}

// TestNATSImageIsPinned rebuilds the bundled NATS server's image for every
// platform and requires deploy/nats's StatefulSet to reference exactly it
// (name, the nats-server version of go.mod, digest). The image's
// nats-server is that version and starts; its httpprobe passes against the
// monitoring port and fails once the server is gone.
func TestNATSImageIsPinned(t *testing.T) {
	ctx := context.Background()
	spec, version, err := ociimage.NATS(ctx, root(t))
	require.NoError(t, err)
	idx, err := ociimage.Build(ctx, spec)
	require.NoError(t, err)
	digest, err := idx.Digest()
	require.NoError(t, err)
	want := fmt.Sprintf("%s/%s:%s@%s", ociimage.DefaultRegistry, ociimage.NATSName, version, digest)

	raw, err := os.ReadFile(filepath.Join(root(t), "deploy", "nats", "statefulset.yaml"))
	require.NoError(t, err)
	var sts appsv1.StatefulSet
	require.NoError(t, yaml.Unmarshal(raw, &sts))
	require.NotEmpty(t, sts.Spec.Template.Spec.Containers)
	c := sts.Spec.Template.Spec.Containers[0]
	require.Equal(t, "nats", c.Name, "the server's container comes first")
	assert.Equal(t, want, c.Image, "deploy/nats pins the image this commit builds: update the StatefulSet's image to it")
	require.NotNil(t, sts.Spec.Template.Spec.SecurityContext.RunAsUser)
	assert.EqualValues(t, ociimage.NonRoot, *sts.Spec.Template.Spec.SecurityContext.RunAsUser, "the pod runs as the image's user")

	img, err := ociimage.Platform(idx, host)
	require.NoError(t, err)
	cf, err := img.ConfigFile()
	require.NoError(t, err)
	assert.Equal(t, []string{"/usr/bin/nats-server"}, cf.Config.Entrypoint)
	assert.Equal(t, version, cf.Config.Labels["org.opencontainers.image.version"])
	server := binary(t, img, "/usr/bin/nats-server")
	out, err := exec.Command(server, "--version").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, "nats-server: v"+version, strings.TrimSpace(string(out)))

	probe := binary(t, img, "/usr/bin/httpprobe")
	for name, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		require.NotNil(t, p.Exec, name)
		assert.Equal(t, "/usr/bin/httpprobe", p.Exec.Command[0], "the %s probe execs the image's httpprobe", name)
	}
	port, err := natsembed.FreePort("127.0.0.1")
	require.NoError(t, err)
	mport, err := natsembed.FreePort("127.0.0.1")
	require.NoError(t, err)
	srv := exec.Command(server, "-a", "127.0.0.1", "-p", fmt.Sprint(port), "-m", fmt.Sprint(mport), "-js", "-sd", t.TempDir())
	require.NoError(t, srv.Start())
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = srv.Process.Kill()
			_ = srv.Wait()
		}
	})
	health := fmt.Sprintf("http://127.0.0.1:%d/healthz?js-enabled-only=true", mport)
	require.Eventually(t, func() bool { return exec.Command(probe, health).Run() == nil }, 30*time.Second, 50*time.Millisecond,
		"the image's httpprobe passes once its nats-server serves")
	require.NoError(t, srv.Process.Kill())
	_ = srv.Wait()
	stopped = true
	err = exec.Command(probe, health).Run()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "the probe fails with the server gone")
	assert.Equal(t, 1, exit.ExitCode())
	err = exec.Command(probe).Run()
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, 2, exit.ExitCode(), "usage")
}
