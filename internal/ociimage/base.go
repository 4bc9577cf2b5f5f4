package ociimage

import (
	"archive/tar"
	"bytes"
	"encoding/pem"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// NonRoot is the user and group every image runs as.
const NonRoot = 65532

// File is one entry of an image's layer. Parent directories are added
// (0755, root-owned) as needed.
type File struct {
	// Path is absolute, slash-separated.
	Path string
	// Mode holds the permission bits; Dir makes it a directory.
	Mode int64
	Dir  bool
	// UID and GID own the entry (0 unless set).
	UID, GID int
	Data     []byte
}

// CABundlePath is where the base keeps the CA bundle: Go's first choice on
// Linux, and most other programs'.
const CABundlePath = "/etc/ssl/certs/ca-certificates.crt"

// baseFiles are the base's entries: the CA bundle, the users, a writable
// /tmp and the non-root user's home.
func baseFiles() []File {
	var ca bytes.Buffer
	for r := range bundle.Roots() {
		_ = pem.Encode(&ca, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate})
	}
	return []File{
		{Path: CABundlePath, Mode: 0o644, Data: ca.Bytes()},
		{Path: "/etc/passwd", Mode: 0o644, Data: fmt.Appendf(nil,
			"root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", NonRoot, NonRoot)},
		{Path: "/etc/group", Mode: 0o644, Data: fmt.Appendf(nil, "root:x:0:\nnonroot:x:%d:\n", NonRoot)},
		{Path: "/tmp", Mode: 0o1777, Dir: true},
		{Path: "/home/nonroot", Mode: 0o700, Dir: true, UID: NonRoot, GID: NonRoot},
	}
}

// layerTar is the uncompressed layer of files: parents first, sorted by
// path, every time at t.
func layerTar(files []File, t time.Time) ([]byte, error) {
	byPath := map[string]File{}
	for _, f := range files {
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path {
			return nil, fmt.Errorf("ociimage: %q is not a clean absolute path", f.Path)
		}
		if _, dup := byPath[f.Path]; dup {
			return nil, fmt.Errorf("ociimage: %s given twice", f.Path)
		}
		byPath[f.Path] = f
	}
	for p := range byPath {
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if _, ok := byPath[d]; !ok {
				byPath[d] = File{Path: d, Mode: 0o755, Dir: true}
			}
		}
	}
	paths := make([]string, 0, len(byPath))
	for p := range byPath {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	var b bytes.Buffer
	w := tar.NewWriter(&b)
	for _, p := range paths {
		f := byPath[p]
		h := &tar.Header{
			Name: strings.TrimPrefix(p, "/"), Mode: f.Mode, Uid: f.UID, Gid: f.GID,
			ModTime: t, Format: tar.FormatPAX, Typeflag: tar.TypeReg, Size: int64(len(f.Data)),
		}
		if f.Dir {
			h.Name += "/"
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := w.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("ociimage: %s: %w", p, err)
		}
		if _, err := w.Write(f.Data); err != nil {
			return nil, fmt.Errorf("ociimage: %s: %w", p, err)
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
