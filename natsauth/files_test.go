package natsauth_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/natsauth"
)

// nobody is the uid the ownership rows hand a directory to.
const nobody = 65534

// TestFilesRefuseWhatIsNotTheUsers: credentials are written to (and read
// back from) the current user's directories only, never through a
// symbolic link: a link planted at a seed's path would send the seed where
// it points, and a directory somebody else owns lets its owner read the
// seeds or plant its own to be kept.
func TestFilesRefuseWhatIsNotTheUsers(t *testing.T) {
	a, err := natsauth.Generate(natsauth.Config{Nodes: []string{"n1"}})
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		// plant prepares out (not yet created) and returns the file that
		// must be left as it was, if any.
		plant     func(t *testing.T, out string) (untouched string)
		needsRoot bool
		want      string
		// wantRead is what ReadFiles says; empty when it reads nothing the
		// row planted.
		wantRead string
	}{
		{
			name: "a symbolic link planted at a worker's seed",
			plant: func(t *testing.T, out string) string {
				mkdir(t, out, natsauth.WorkersDir)
				return symlinkToFile(t, filepath.Join(out, natsauth.WorkersDir, "n1.nk"))
			},
			want: "n1.nk is a symbolic link", wantRead: "n1.nk is a symbolic link",
		},
		{
			name: "a symbolic link planted at the reader's seed",
			plant: func(t *testing.T, out string) string {
				mkdir(t, out, natsauth.ReaderDir)
				return symlinkToFile(t, filepath.Join(out, natsauth.ReaderDir, "reader.nk"))
			},
			want: "reader.nk is a symbolic link", wantRead: "reader.nk is a symbolic link",
		},
		{
			name: "a symbolic link planted at the configuration",
			plant: func(t *testing.T, out string) string {
				mkdir(t, out)
				return symlinkToFile(t, filepath.Join(out, natsauth.ConfigFile))
			},
			want: natsauth.ConfigFile + " is a symbolic link",
		},
		{
			name: "a credential directory that is a symbolic link",
			plant: func(t *testing.T, out string) string {
				mkdir(t, out)
				elsewhere := t.TempDir()
				require.NoError(t, os.Symlink(elsewhere, filepath.Join(out, natsauth.ControllerDir)))
				return filepath.Join(elsewhere, "controller.nk")
			},
			want: natsauth.ControllerDir + " is a symbolic link", wantRead: natsauth.ControllerDir + " is a symbolic link",
		},
		{
			name: "--out is a symbolic link",
			plant: func(t *testing.T, out string) string {
				elsewhere := t.TempDir()
				require.NoError(t, os.Symlink(elsewhere, out))
				return filepath.Join(elsewhere, natsauth.ConfigFile)
			},
			want: "out is a symbolic link", wantRead: "out is a symbolic link",
		},
		{
			name: "--out is a file",
			plant: func(t *testing.T, out string) string {
				require.NoError(t, os.WriteFile(out, []byte("x"), 0o600))
				return ""
			},
			want: "out is not a directory", wantRead: "out is not a directory",
		},
		{
			name: "--out owned by another user",
			plant: func(t *testing.T, out string) string {
				mkdir(t, out)
				require.NoError(t, os.Chown(out, nobody, nobody))
				return ""
			},
			needsRoot: true, want: "out is owned by uid 65534, not by this user", wantRead: "out is owned by uid 65534",
		},
		{
			name: "a credential directory owned by another user",
			plant: func(t *testing.T, out string) string {
				mkdir(t, out, natsauth.WorkersDir)
				require.NoError(t, os.Chown(filepath.Join(out, natsauth.WorkersDir), nobody, nobody))
				return ""
			},
			needsRoot: true, want: natsauth.WorkersDir + " is owned by uid 65534", wantRead: natsauth.WorkersDir + " is owned by uid 65534",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.needsRoot && os.Geteuid() != 0 {
				t.Skip("handing a directory to another user takes root (chown); this row runs when the tests run as root")
			}
			out := filepath.Join(t.TempDir(), "out")
			untouched := tc.plant(t, out)
			var before []byte
			if untouched != "" {
				before, _ = os.ReadFile(untouched)
			}

			err := a.WriteFiles(out)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			if untouched != "" {
				after, _ := os.ReadFile(untouched)
				assert.Equal(t, before, after, "nothing was written through the link")
			}

			_, err = natsauth.ReadFiles(out, natsauth.ModeNKey, []string{"n1"})
			if tc.wantRead == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantRead)
		})
	}
}

// TestWriteFilesTightensModes: files and directories that exist with wider
// modes (an earlier run under a lax umask, a copy) end up 0600 and 0700;
// the configuration, which holds no secret, 0644.
func TestWriteFilesTightensModes(t *testing.T) {
	a, err := natsauth.Generate(natsauth.Config{Nodes: []string{"n1"}})
	require.NoError(t, err)
	out := t.TempDir()
	for _, f := range []struct {
		path string
		dir  bool
		mode os.FileMode
	}{
		{"", true, 0o777},
		{natsauth.WorkersDir, true, 0o777},
		{natsauth.ControllerDir, true, 0o755},
		{filepath.Join(natsauth.WorkersDir, "n1.nk"), false, 0o666},
		{filepath.Join(natsauth.ControllerDir, "controller.nk"), false, 0o644},
		{natsauth.ConfigFile, false, 0o666},
	} {
		p := filepath.Join(out, f.path)
		if f.dir {
			require.NoError(t, os.MkdirAll(p, 0o700))
		} else {
			require.NoError(t, os.WriteFile(p, []byte("old"), 0o600))
		}
		require.NoError(t, os.Chmod(p, f.mode))
	}
	require.NoError(t, a.WriteFiles(out))
	for path, want := range map[string]os.FileMode{
		"":                     0o700,
		natsauth.WorkersDir:    0o700,
		natsauth.ControllerDir: 0o700,
		natsauth.ReaderDir:     0o700,
		filepath.Join(natsauth.WorkersDir, "n1.nk"):            0o600,
		filepath.Join(natsauth.ControllerDir, "controller.nk"): 0o600,
		filepath.Join(natsauth.ReaderDir, "reader.nk"):         0o600,
		natsauth.ConfigFile:                                    0o644,
	} {
		fi, err := os.Stat(filepath.Join(out, path))
		require.NoError(t, err)
		assert.Equal(t, want, fi.Mode().Perm(), "mode of %q", path)
	}
}

// TestReadFilesKeepsEveryCredential: what WriteFiles wrote, ReadFiles gives
// back as Config.Existing, so a regeneration keeps the controller's, the
// reader's and every worker's credential, in both modes.
func TestReadFilesKeepsEveryCredential(t *testing.T) {
	for _, mode := range []natsauth.Mode{natsauth.ModeNKey, natsauth.ModePassword} {
		t.Run(string(mode), func(t *testing.T) {
			nodes := []string{"n1", "n2.example.com"}
			first, err := natsauth.Generate(natsauth.Config{Nodes: nodes, Mode: mode, BcryptCost: 4})
			require.NoError(t, err)
			out := t.TempDir()
			require.NoError(t, first.WriteFiles(out))
			existing, err := natsauth.ReadFiles(out, mode, append(nodes, "n3"))
			require.NoError(t, err)
			assert.Len(t, existing, 4, "the controller, the reader and n1, n2 (n3 has no file yet)")
			second, err := natsauth.Generate(natsauth.Config{Nodes: append(nodes, "n3"), Mode: mode, BcryptCost: 4, Existing: existing})
			require.NoError(t, err)
			secret := func(u natsauth.User) string { return string(u.Credential.Seed) + u.Credential.Password }
			assert.Equal(t, secret(first.Controller), secret(second.Controller))
			assert.Equal(t, secret(first.Reader), secret(second.Reader))
			for _, n := range nodes {
				w1, _ := first.Worker(n)
				w2, _ := second.Worker(n)
				assert.Equal(t, secret(w1), secret(w2), n)
			}

			none, err := natsauth.ReadFiles(filepath.Join(out, "missing"), mode, nodes)
			require.NoError(t, err, "nothing to keep is not an error")
			assert.Empty(t, none)
			_, err = natsauth.ReadFiles(out, mode, []string{"../n1"})
			require.ErrorContains(t, err, `node "../n1"`, "a node name is never a path")
		})
	}
}

func mkdir(t *testing.T, parts ...string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Join(parts...), 0o700))
}

// symlinkToFile plants at path a link to a file elsewhere and returns the
// file.
func symlinkToFile(t *testing.T, path string) string {
	t.Helper()
	target := filepath.Join(t.TempDir(), "target")
	require.NoError(t, os.WriteFile(target, []byte("the attacker's file"), 0o644))
	require.NoError(t, os.Symlink(target, path))
	return target
}
