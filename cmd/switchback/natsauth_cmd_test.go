package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/natsauth"
	"github.com/switchback-dev/switchback/natsauth/callout"
)

// Re-running nats-auth with one more node keeps every existing credential
// (a rotation would lock out running workers) and adds the new node's.
func TestNATSAuthKeepsCredentialsAcrossRuns(t *testing.T) {
	for _, mode := range []natsauth.Mode{natsauth.ModeNKey, natsauth.ModePassword} {
		t.Run(string(mode), func(t *testing.T) {
			dir := t.TempDir()
			ext := map[natsauth.Mode]string{natsauth.ModeNKey: ".nk", natsauth.ModePassword: ".password"}[mode]
			code, out, errOut := runCmd(t, time.Minute, "nats-auth", "--mode", string(mode), "--node", "n1,n2", "--out", dir,
				"--secrets-namespace", "longhorn-system")
			require.Equal(t, 0, code, "%s\n%s", out, errOut)
			n1 := readFile(t, dir, natsauth.WorkersDir, "n1"+ext)
			readerFile := map[natsauth.Mode]string{natsauth.ModeNKey: "reader.nk", natsauth.ModePassword: "password"}[mode]
			reader := readFile(t, dir, natsauth.ReaderDir, readerFile)
			conf := readFile(t, dir, natsauth.ConfigFile)
			assert.Contains(t, readFile(t, dir, secretsFile), "name: switchback-nats-workers")
			assert.Contains(t, readFile(t, dir, secretsFile), "name: "+natsauth.ReaderSecretName)

			code, out, errOut = runCmd(t, time.Minute, "nats-auth", "--mode", string(mode), "--node", "n1", "--node", "n2,n3", "--out", dir)
			require.Equal(t, 0, code, "%s\n%s", out, errOut)
			assert.Contains(t, out, "(4 kept)", "the controller, the reader and both workers")
			assert.Equal(t, n1, readFile(t, dir, natsauth.WorkersDir, "n1"+ext), "n1's credential is kept")
			assert.Equal(t, reader, readFile(t, dir, natsauth.ReaderDir, readerFile), "the reader's credential is kept")
			assert.FileExists(t, filepath.Join(dir, natsauth.WorkersDir, "n3"+ext))
			assert.NotEqual(t, conf, readFile(t, dir, natsauth.ConfigFile), "the configuration gains n3")
			assert.NoFileExists(t, filepath.Join(dir, secretsFile), "the outdated Secrets are gone")

			code, _, _ = runCmd(t, time.Minute, "nats-auth", "--mode", string(mode), "--node", "n1,n2,n3", "--out", dir, "--keep=false")
			require.Equal(t, 0, code)
			assert.NotEqual(t, n1, readFile(t, dir, natsauth.WorkersDir, "n1"+ext), "--keep=false generates anew")
		})
	}
}

// A credential file that cannot be read back is an error, not a silent
// rotation of that worker's key.
func TestNATSAuthRefusesACorruptCredential(t *testing.T) {
	dir := t.TempDir()
	code, _, _ := runCmd(t, time.Minute, "nats-auth", "--node", "n1", "--out", dir)
	require.Equal(t, 0, code)
	require.NoError(t, os.WriteFile(filepath.Join(dir, natsauth.WorkersDir, "n1.nk"), []byte("not a seed"), 0o600))
	code, _, errOut := runCmd(t, time.Minute, "nats-auth", "--node", "n1", "--out", dir)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "--keep: natsauth: node n1:")
	assert.Contains(t, errOut, "n1.nk")
}

// nats-auth writes its credentials only into a directory of the current
// user, never through a symbolic link, its own secrets.yaml included; each
// case of natsauth.WriteFiles is in natsauth/files_test.go.
func TestNATSAuthRefusesADirectoryNotTheUsers(t *testing.T) {
	for _, tc := range []struct {
		name      string
		plant     func(t *testing.T, out string)
		needsRoot bool
		want      string
	}{
		{"--out is a symbolic link", func(t *testing.T, out string) {
			require.NoError(t, os.Symlink(t.TempDir(), out))
		}, false, "out is a symbolic link"},
		{"--out owned by another user", func(t *testing.T, out string) {
			require.NoError(t, os.Mkdir(out, 0o700))
			require.NoError(t, os.Chown(out, 65534, 65534))
		}, true, "out is owned by uid 65534, not by this user"},
		{"a symbolic link planted at secrets.yaml", func(t *testing.T, out string) {
			require.NoError(t, os.Mkdir(out, 0o700))
			require.NoError(t, os.Symlink(filepath.Join(t.TempDir(), "elsewhere"), filepath.Join(out, secretsFile)))
		}, false, secretsFile + " is a symbolic link"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.needsRoot && os.Geteuid() != 0 {
				t.Skip("handing a directory to another user takes root (chown); this case runs when the tests run as root")
			}
			out := filepath.Join(t.TempDir(), "out")
			tc.plant(t, out)
			for _, keep := range []string{"--keep=true", "--keep=false"} {
				code, stdout, errOut := runCmd(t, time.Minute, "nats-auth", "--node", "n1", "--out", out, keep, "--secrets-namespace", "longhorn-system")
				assert.Equal(t, 1, code, "%s %s\n%s", keep, stdout, errOut)
				assert.Contains(t, errOut, tc.want, keep)
			}
		})
	}
}

func readFile(t *testing.T, parts ...string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(parts...))
	require.NoError(t, err)
	return string(b)
}

// TestNATSAuthCalloutKeepsItsKeys: `nats-auth --callout` keeps the callout's
// keys across runs (the servers' issuer does not change), refuses a
// directory holding only some of them instead of rotating them silently,
// and refuses a symbolic link planted at one.
func TestNATSAuthCalloutKeepsItsKeys(t *testing.T) {
	out := filepath.Join(t.TempDir(), "auth")
	run1 := func() (int, string, string) {
		return runCmd(t, time.Minute, "nats-auth", "--callout", "--node-accounts=false", "--out", out)
	}
	code, stdout, stderr := run1()
	require.Equal(t, 0, code, "%s\n%s", stdout, stderr)
	assert.Contains(t, stdout, "new callout keys")
	issuer, err := os.ReadFile(filepath.Join(out, calloutDir, callout.IssuerKey))
	require.NoError(t, err)
	conf, err := os.ReadFile(filepath.Join(out, natsauth.ConfigFile))
	require.NoError(t, err)

	code, stdout, stderr = run1()
	require.Equal(t, 0, code, "%s\n%s", stdout, stderr)
	assert.Contains(t, stdout, "the callout keys kept")
	again, err := os.ReadFile(filepath.Join(out, calloutDir, callout.IssuerKey))
	require.NoError(t, err)
	assert.Equal(t, issuer, again, "the issuer is kept")
	conf2, err := os.ReadFile(filepath.Join(out, natsauth.ConfigFile))
	require.NoError(t, err)
	assert.Equal(t, conf, conf2, "the same servers' configuration")
	keys, err := callout.ReadKeys(filepath.Join(out, calloutDir))
	require.NoError(t, err)
	assert.Equal(t, natsauth.DefaultAccount, keys.Account, "the workers go to Switchback's account, which the keys name for the controller")
	assert.Contains(t, string(conf), `account: "`+natsauth.DefaultAccount+`"`)

	// In the global account, no account file is left to mislead the controller.
	code, _, stderr = runCmd(t, time.Minute, "nats-auth", "--callout", "--out", out, "--account", "")
	assert.Equal(t, 2, code, "node accounts (the default) import from an account")
	assert.Contains(t, stderr, "--node-accounts imports from --account, which is empty")
	code, stdout, stderr = runCmd(t, time.Minute, "nats-auth", "--callout", "--node-accounts=false", "--out", out, "--account", "")
	require.Equal(t, 0, code, "%s\n%s", stdout, stderr)
	keys, err = callout.ReadKeys(filepath.Join(out, calloutDir))
	require.NoError(t, err)
	assert.Empty(t, keys.Account)
	assert.NoFileExists(t, filepath.Join(out, calloutDir, callout.AccountKey))

	// With node accounts: the nodes' accounts in the configuration, and the
	// nodes in the keys, for the callout to place each worker in its own.
	code, stdout, stderr = runCmd(t, time.Minute, "nats-auth", "--callout", "--node-accounts", "--node", "n1,n2.example.com", "--out", out)
	require.Equal(t, 0, code, "%s\n%s", stdout, stderr)
	keys, err = callout.ReadKeys(filepath.Join(out, calloutDir))
	require.NoError(t, err)
	assert.Equal(t, []string{"n1", "n2.example.com"}, keys.NodeAccounts)
	conf, err = os.ReadFile(filepath.Join(out, natsauth.ConfigFile))
	require.NoError(t, err)
	assert.Contains(t, string(conf), `"`+natsauth.NodeAccount(natsauth.DefaultAccount, "n2.example.com")+`"`)
	assert.NoFileExists(t, filepath.Join(out, calloutDir, callout.LayoutKey))
	// With no node listed (the default install's command), the layout the
	// controller renders the nodes' accounts from, and no account of a node
	// yet.
	code, stdout, stderr = runCmd(t, time.Minute, "nats-auth", "--callout", "--out", out)
	require.Equal(t, 0, code, "%s\n%s", stdout, stderr)
	keys, err = callout.ReadKeys(filepath.Join(out, calloutDir))
	require.NoError(t, err)
	assert.Nil(t, keys.NodeAccounts)
	require.NotNil(t, keys.Layout)
	assert.NoFileExists(t, filepath.Join(out, calloutDir, callout.NodeAccountsKey))
	conf, err = os.ReadFile(filepath.Join(out, natsauth.ConfigFile))
	require.NoError(t, err)
	assert.NotContains(t, string(conf), natsauth.NodeAccount(natsauth.DefaultAccount, "n1"))
	rendered, err := keys.Layout.Render(nil)
	require.NoError(t, err)
	assert.Equal(t, rendered.ServerConfig(), string(conf), "the layout renders the generator's configuration")
	// Without them again, no node list or layout is left to mislead the
	// controller.
	code, stdout, stderr = run1()
	require.Equal(t, 0, code, "%s\n%s", stdout, stderr)
	assert.NoFileExists(t, filepath.Join(out, calloutDir, callout.NodeAccountsKey))
	assert.NoFileExists(t, filepath.Join(out, calloutDir, callout.LayoutKey))

	require.NoError(t, os.Remove(filepath.Join(out, calloutDir, callout.XKeyKey)))
	code, _, stderr = run1()
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "holds only some of the callout's keys (missing "+callout.XKeyKey+")")

	target := filepath.Join(t.TempDir(), "elsewhere")
	require.NoError(t, os.WriteFile(target, []byte("x"), 0o600))
	require.NoError(t, os.Symlink(target, filepath.Join(out, calloutDir, callout.XKeyKey)))
	code, _, stderr = run1()
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, callout.XKeyKey)
	b, err := os.ReadFile(target)
	require.NoError(t, err)
	assert.Equal(t, "x", string(b), "nothing written through the link")
}
