// Package ociimage builds Switchback's container images with no container
// daemon and no network beyond the Go module proxy: static Go binaries
// (go build, CGO off, -trimpath) in one layer over a base that holds only a
// CA bundle (from the pinned golang.org/x/crypto/x509roots/fallback module),
// the non-root user 65532 and /tmp. Everything that goes into an image is a
// pure function of the sources, the module versions and Toolchain: every
// file's time is the image's Created, owners are 0 or 65532, entries are
// sorted, so two builds of the same commit have the same digest.
//
// Two images: Switchback's own (the switchback binary, Switchback) and the
// bundled NATS server's (nats-server built from the very module version the
// tests run, plus the httpprobe its probes exec, NATS), each an OCI index of
// Platforms.
package ociimage
