package ociimage

import (
	"context"
	"fmt"
	"os"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// refAnnotation names an index entry of an OCI layout (its tag).
const refAnnotation = "org.opencontainers.image.ref.name"

// WriteLayout writes idx into an OCI image layout at dir (created anew),
// its entry in index.json annotated with ref.
func WriteLayout(dir string, idx v1.ImageIndex, ref string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("ociimage: layout %s: %w", dir, err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{refAnnotation: ref})); err != nil {
		return fmt.Errorf("ociimage: layout %s: %w", dir, err)
	}
	return nil
}

// Platform returns idx's image for p.
func Platform(idx v1.ImageIndex, p v1.Platform) (v1.Image, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		if d.Platform != nil && d.Platform.OS == p.OS && d.Platform.Architecture == p.Architecture {
			return idx.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("ociimage: no image for %s/%s", p.OS, p.Architecture)
}

// WriteDockerTarball writes idx's image for p as a tarball `docker load`
// (and `podman load`, `ctr import`) reads, tagged ref.
func WriteDockerTarball(path string, idx v1.ImageIndex, ref string, p v1.Platform) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("ociimage: %s: %w", ref, err)
	}
	img, err := Platform(idx, p)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(path, tag, img)
}

// Push pushes idx to ref with the credentials of the local Docker
// configuration (docker login, or DOCKER_CONFIG). The digest stays the
// same: the registry stores the very manifests built.
func Push(ctx context.Context, idx v1.ImageIndex, ref string) error {
	r, err := name.ParseReference(ref)
	if err != nil {
		return fmt.Errorf("ociimage: %s: %w", ref, err)
	}
	if err := remote.WriteIndex(r, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return fmt.Errorf("ociimage: push %s: %w", ref, err)
	}
	return nil
}
