package ociimage

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Platforms are the platforms an image is built for by default: those
// Longhorn's images are published for.
var Platforms = []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}

// Spec describes one image.
type Spec struct {
	// Binaries go to /usr/bin/<name>, mode 0755.
	Binaries map[string]Binary
	// Entrypoint and Cmd of the image's configuration.
	Entrypoint, Cmd []string
	// Labels are the configuration's labels (org.opencontainers.image.*).
	Labels map[string]string
	// Created is the image's time and every file's.
	Created time.Time
	// Platforms to build; default Platforms.
	Platforms []v1.Platform
}

// Build builds the image of every platform and returns their index.
func Build(ctx context.Context, s Spec) (v1.ImageIndex, error) {
	platforms := s.Platforms
	if len(platforms) == 0 {
		platforms = Platforms
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range platforms {
		img, err := s.image(ctx, p)
		if err != nil {
			return nil, err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	return idx, nil
}

func (s Spec) image(ctx context.Context, p v1.Platform) (v1.Image, error) {
	files := baseFiles()
	for name, b := range s.Binaries {
		bin, err := b.build(ctx, p)
		if err != nil {
			return nil, err
		}
		files = append(files, File{Path: "/usr/bin/" + name, Mode: 0o755, Data: bin})
	}
	t := s.Created.UTC().Truncate(time.Second)
	tarBytes, err := layerTar(files, t)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(tarBytes)), nil },
		tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
	if err != nil {
		return nil, fmt.Errorf("ociimage: layer: %w", err)
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	if img, err = mutate.AppendLayers(img, layer); err != nil {
		return nil, fmt.Errorf("ociimage: layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	cf.Created = v1.Time{Time: t}
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", NonRoot, NonRoot),
		Entrypoint: s.Entrypoint,
		Cmd:        s.Cmd,
		Env:        []string{"PATH=/usr/bin", "SSL_CERT_FILE=" + CABundlePath},
		WorkingDir: "/",
		Labels:     s.Labels,
	}
	// The history names what made the layer, for `docker history`.
	cf.History = []v1.History{{Created: v1.Time{Time: t}, CreatedBy: "switchback ociimage: base, /usr/bin binaries", Comment: "reproducible"}}
	return mutate.ConfigFile(img, cf)
}
