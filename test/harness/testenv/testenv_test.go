package testenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/discovery"
)

func TestPKIChainsAndUsages(t *testing.T) {
	p, err := newPKI()
	require.NoError(t, err)

	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(p.caCert))

	parse := func(pemData []byte) *x509.Certificate {
		block, _ := pem.Decode(pemData)
		require.NotNil(t, block)
		c, err := x509.ParseCertificate(block.Bytes)
		require.NoError(t, err)
		return c
	}

	tests := []struct {
		name    string
		cert    []byte
		key     []byte
		usage   x509.ExtKeyUsage
		dnsName string
		org     string
	}{
		{name: "serving cert valid for 127.0.0.1", cert: p.serverCert, key: p.serverKey, usage: x509.ExtKeyUsageServerAuth, dnsName: "127.0.0.1"},
		{name: "serving cert valid for localhost", cert: p.serverCert, key: p.serverKey, usage: x509.ExtKeyUsageServerAuth, dnsName: "localhost"},
		{name: "admin client cert in system:masters", cert: p.adminCert, key: p.adminKey, usage: x509.ExtKeyUsageClientAuth, org: "system:masters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := parse(tt.cert)
			_, err := c.Verify(x509.VerifyOptions{Roots: roots, DNSName: tt.dnsName, KeyUsages: []x509.ExtKeyUsage{tt.usage}})
			require.NoError(t, err)
			if tt.org != "" {
				assert.Equal(t, []string{tt.org}, c.Subject.Organization)
			}
			_, err = tls.X509KeyPair(tt.cert, tt.key)
			require.NoError(t, err, "certificate and key must match")
		})
	}

	block, _ := pem.Decode(p.saPub)
	require.NotNil(t, block)
	assert.Equal(t, "PUBLIC KEY", block.Type)
}

func TestWithoutEtcdVars(t *testing.T) {
	got := withoutEtcdVars([]string{"PATH=/bin", "ETCD_NAME=x", "ETCD_DATA_DIR=/y", "MY_ETCD_X=1", "HOME=/root"})
	assert.Equal(t, []string{"PATH=/bin", "MY_ETCD_X=1", "HOME=/root"}, got)
}

func TestModulePathOf(t *testing.T) {
	tests := []struct{ in, want string }{
		{"module github.com/switchback-dev/switchback\n\ngo 1.26\n", ModulePath},
		{"// comment\nmodule \"k8s-test-bins\"\n", "k8s-test-bins"},
		{"go 1.26\n", ""},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, modulePathOf([]byte(tt.in)), tt.in)
	}
}

func TestCheckBinariesNamesMissing(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, EtcdBin), []byte("#!/bin/true\n"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, KubectlBin), []byte("not executable"), 0o644))
	err := CheckBinaries(dir)
	require.ErrorIs(t, err, ErrBinariesMissing)
	assert.Contains(t, err.Error(), "kube-apiserver, kubectl")
	assert.NotContains(t, err.Error(), "etcd,")
}

// TestStartStop starts a bare environment, checks that it is the version the
// binaries were built for and that kubectl reaches it, then checks that Stop
// leaves no process and no directory behind.
func TestStartStop(t *testing.T) {
	binDir := RequireBinaries(t)
	t.Setenv("ETCD_NAME", "must-be-ignored") // would rename the member if passed on

	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	env, err := Start(ctx, Options{BinDir: binDir})
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.Stop() })
	t.Logf("kube-apiserver ready in %s", env.StartupTime)

	disco, err := discovery.NewDiscoveryClientForConfig(env.Config)
	require.NoError(t, err)
	v, err := disco.ServerVersion()
	require.NoError(t, err)
	assert.Equal(t, "v"+K8sVersion, v.GitVersion, "the build ldflags must stamp the release version")

	out, stderr, err := env.Kubectl(ctx, nil, "get", "--raw", "/readyz")
	require.NoError(t, err, stderr)
	assert.Equal(t, "ok", strings.TrimSpace(out))

	kc, err := os.ReadFile(env.Kubeconfig)
	require.NoError(t, err)
	assert.Contains(t, string(kc), env.Config.Host)

	pids := env.Pids()
	require.Len(t, pids, 2)
	require.NoError(t, env.Stop())
	for _, pid := range pids {
		assert.False(t, alive(pid), "pid %d still alive after Stop", pid)
	}
	_, err = os.Stat(env.Dir)
	assert.True(t, errors.Is(err, os.ErrNotExist), "work dir must be removed, stat: %v", err)
	require.NoError(t, env.Stop(), "Stop must be idempotent")
}

// TestCrashedTestLeavesNoServers runs a child test process that starts an
// environment and dies without calling Stop, as a panicking test or a `go test
// -timeout` does, and checks that the kernel killed its servers.
func TestCrashedTestLeavesNoServers(t *testing.T) {
	RequireBinaries(t)
	if os.Getenv("TESTENV_CRASH_CHILD") != "" {
		t.Skip("already the child")
	}
	pidFile := filepath.Join(t.TempDir(), "pids")
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperCrashChild$", "-test.v")
	cmd.Env = append(os.Environ(), "TESTENV_CRASH_CHILD="+pidFile)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "the child must die abnormally; output:\n%s", out)

	data, err := os.ReadFile(pidFile)
	require.NoError(t, err, "child output:\n%s", out)
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		pid, err := strconv.Atoi(f)
		require.NoError(t, err)
		pids = append(pids, pid)
	}
	require.Len(t, pids, 2)

	deadline := time.Now().Add(15 * time.Second)
	for _, pid := range pids {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		assert.False(t, alive(pid), "server pid %d outlived its crashed test process", pid)
	}
	// The child's work dir is left behind (no Go code ran to remove it).
	if dir := strings.TrimSpace(string(out)); dir != "" {
		for _, line := range strings.Split(dir, "\n") {
			if d, ok := strings.CutPrefix(line, "WORKDIR="); ok {
				os.RemoveAll(d)
			}
		}
	}
}

// TestHelperCrashChild is the child of TestCrashedTestLeavesNoServers; it
// does nothing in a normal run.
func TestHelperCrashChild(t *testing.T) {
	pidFile := os.Getenv("TESTENV_CRASH_CHILD")
	if pidFile == "" {
		t.Skip("helper process for TestCrashedTestLeavesNoServers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	env, err := Start(ctx, Options{BinDir: RequireBinaries(t)})
	require.NoError(t, err)
	fmt.Printf("WORKDIR=%s\n", env.Dir)
	var b strings.Builder
	for _, pid := range env.Pids() {
		fmt.Fprintf(&b, "%d\n", pid)
	}
	require.NoError(t, os.WriteFile(pidFile, []byte(b.String()), 0o644))
	// Die the way a crashed test binary does: no deferred code, no Stop.
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

func TestFreePortsDistinct(t *testing.T) {
	ports, err := freePorts(3)
	require.NoError(t, err)
	seen := map[int]bool{}
	for _, p := range ports {
		assert.False(t, seen[p], "port %d twice", p)
		seen[p] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		require.NoError(t, err, "released port must be bindable")
		l.Close()
	}
}

// alive reports whether pid is a live process; a zombie (dead, not yet
// reaped by its new parent) counts as dead.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}
