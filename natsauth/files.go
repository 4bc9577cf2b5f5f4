package natsauth

import (
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nkeys"
)

// Files names what WriteFiles writes under its directory.
const (
	// ConfigFile is the server configuration snippet (not secret).
	ConfigFile = "switchback-auth.conf"
	// ControllerDir holds the controller's credential files.
	ControllerDir = "controller"
	// ReaderDir holds the reader's credential files (reader.nk, or user and
	// password).
	ReaderDir = "reader"
	// WorkersDir holds one credential file per worker, named by SecretKey.
	WorkersDir = "workers"
)

// The files of a user with a directory (and a Secret) of its own: its seed
// file, or user and password files.
const (
	controllerSeedFile = "controller.nk"
	readerSeedFile     = "reader.nk"
	userFile           = "user"
	passwordFile       = "password"
)

// Modes of what WriteFiles writes.
const (
	privateFileMode = 0o600
	privateDirMode  = 0o700
	configFileMode  = 0o644
)

// WriteFiles writes the generated authorization under dir: ConfigFile
// (mode 0644), the controller's credential under ControllerDir, the
// reader's under ReaderDir and each worker's under WorkersDir (mode 0600,
// directories 0700). It is what `switchback nats-auth` writes before
// `kubectl create secret generic --from-file`.
//
// Credentials are written only into directories of the current user: dir
// (created when missing) and its subdirectories must not be symbolic links
// nor owned by anybody else, or someone else could read the seeds or have
// planted their own (CheckDir). Existing files are replaced, never written
// through a symbolic link (WriteFile), and existing files and directories
// get the modes above even when they had wider ones.
func (a *Authorization) WriteFiles(dir string) error {
	dir = filepath.Clean(dir)
	if err := makePrivateDir(dir); err != nil {
		return fmt.Errorf("natsauth: write files under %s: %w", dir, err)
	}
	errs := []error{WriteFile(filepath.Join(dir, ConfigFile), []byte(a.text), configFileMode)}
	for _, f := range []struct {
		sub  string
		data map[string][]byte
	}{
		{ControllerDir, a.ControllerSecretData()},
		{ReaderDir, a.ReaderSecretData()},
		{WorkersDir, a.SecretData()},
	} {
		if len(f.data) > 0 {
			errs = append(errs, WritePrivate(filepath.Join(dir, f.sub), f.data))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("natsauth: write files under %s: %w", dir, err)
	}
	return nil
}

// WritePrivate writes each of files (name → content) into dir the way
// WriteFiles writes credentials: dir private to the current user (created,
// or checked and tightened), each file with WriteFile, owner-only.
func WritePrivate(dir string, files map[string][]byte) error {
	if err := makePrivateDir(dir); err != nil {
		return err
	}
	var errs []error
	for k, v := range files {
		errs = append(errs, WriteFile(filepath.Join(dir, k), v, privateFileMode))
	}
	return errors.Join(errs...)
}

// WriteFile writes data to path the way WriteFiles writes each file: it
// refuses a symbolic link at path instead of following it (O_NOFOLLOW: a
// link planted there would send a seed wherever it points), creates or
// truncates the file, and sets mode perm even on a file that existed with a
// wider one. The directory is the caller's to check (CheckDir).
func WriteFile(path string, data []byte, perm os.FileMode) error {
	f, err := openNoFollow(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	err = errors.Join(err, f.Chmod(perm), f.Close())
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// CheckDir returns an error when dir exists and is a symbolic link, not a
// directory, or a directory owned by another user than the current one:
// credentials written there could be read by its owner, and credentials
// read back from it (ReadFiles) could be the owner's own, planted to be
// kept. A missing dir is fine: WriteFiles creates it.
func CheckDir(dir string) error {
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, iofs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case fi.Mode()&iofs.ModeSymlink != 0:
		return fmt.Errorf("natsauth: %s is a symbolic link: refusing to keep credentials behind it (give the directory itself)", dir)
	case !fi.IsDir():
		return fmt.Errorf("natsauth: %s is not a directory", dir)
	}
	if uid, ok := fileOwner(fi); ok && uid != os.Geteuid() {
		return fmt.Errorf("natsauth: %s is owned by uid %d, not by this user (uid %d): refusing to keep credentials there (its owner could read them, or plant its own)",
			dir, uid, os.Geteuid())
	}
	return nil
}

// makePrivateDir creates dir with mode 0700, or checks an existing one
// (CheckDir) and tightens it to 0700.
func makePrivateDir(dir string) error {
	if err := CheckDir(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, privateDirMode); err != nil {
		return err
	}
	// Also when it existed, and past the umask.
	return os.Chmod(dir, privateDirMode)
}

// openNoFollow opens path, refusing a symbolic link there with an error
// saying so.
func openNoFollow(path string, flag int, perm os.FileMode) (*os.File, error) {
	if oNoFollow == 0 {
		// No O_NOFOLLOW here: look first (racy, but refuses a link planted
		// before the run).
		if err := refuseSymlink(path); err != nil {
			return nil, err
		}
	}
	f, err := os.OpenFile(path, flag|oNoFollow, perm)
	if err != nil {
		// O_NOFOLLOW's error on a link is ELOOP: say what it means.
		if lerr := refuseSymlink(path); lerr != nil {
			return nil, lerr
		}
		return nil, err
	}
	return f, nil
}

func refuseSymlink(path string) error {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&iofs.ModeSymlink != 0 {
		return fmt.Errorf("natsauth: %s is a symbolic link: refusing to follow it", path)
	}
	return nil
}

// ReadFiles reads back the credentials WriteFiles wrote under dir for mode
// and nodes, for Config.Existing, so that a regeneration keeps them: the
// controller's under "", the reader's under ReaderKey, each node's under
// its name. A missing directory or file is simply not kept; an unreadable
// or malformed one is an error, since silently rotating a key would lock
// out whoever uses it. Like WriteFiles, it reads only from directories of
// the current user (CheckDir) and never through a symbolic link.
func ReadFiles(dir string, mode Mode, nodes []string) (map[string]Credential, error) {
	mode, err := checkMode(mode)
	if err != nil {
		return nil, err
	}
	if len(nodes) > 0 { // none in callout mode: the controller's and the reader's only
		if nodes, err = checkNodes(nodes); err != nil {
			return nil, err
		}
	}
	dir = filepath.Clean(dir)
	for _, d := range []string{dir, filepath.Join(dir, ControllerDir), filepath.Join(dir, ReaderDir), filepath.Join(dir, WorkersDir)} {
		if err := CheckDir(d); err != nil {
			return nil, err
		}
	}
	out := map[string]Credential{}
	read := func(key, who, path string) error {
		b, err := ReadFile(path)
		if errors.Is(err, iofs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("natsauth: %s: %w", who, err)
		}
		if mode == ModePassword {
			out[key] = Credential{Password: strings.TrimSpace(string(b))}
			return nil
		}
		var c Credential
		kp, err := nkeys.ParseDecoratedNKey(b)
		if err == nil {
			if c.NKey, err = kp.PublicKey(); err == nil {
				c.Seed, err = kp.Seed()
			}
		}
		if err != nil {
			return fmt.Errorf("natsauth: %s: %s: %w", who, path, err)
		}
		out[key] = c
		return nil
	}
	own := func(sub, seedFile string) string {
		if mode == ModePassword {
			return filepath.Join(dir, sub, passwordFile)
		}
		return filepath.Join(dir, sub, seedFile)
	}
	errs := []error{
		read("", "controller", own(ControllerDir, controllerSeedFile)),
		read(ReaderKey, "reader", own(ReaderDir, readerSeedFile)),
	}
	for _, n := range nodes {
		errs = append(errs, read(n, "node "+n, filepath.Join(dir, WorkersDir, secretKey(mode, n))))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// readFile reads path, refusing a symbolic link.
// ReadFile reads path the way ReadFiles reads each credential: refusing a
// symbolic link there instead of following it. (A process reading a mounted
// Secret, whose files are links, reads it as usual.)
func ReadFile(path string) ([]byte, error) {
	f, err := openNoFollow(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}
