package testenv

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// K8sVersion is the Kubernetes release the test binaries are built from; it
// keys the cache directory so that a version bump never reuses old binaries.
const K8sVersion = "1.37.2"

// ModulePath is the module whose root holds .cache/ and deploy/.
const ModulePath = "github.com/switchback-dev/switchback"

// Binary names expected in the binary directory.
const (
	// EtcdBin is the etcd server binary.
	EtcdBin = "etcd"
	// APIServerBin is the kube-apiserver binary.
	APIServerBin = "kube-apiserver"
	// KubectlBin is the kubectl binary, used by tests that act as a user.
	KubectlBin = "kubectl"
)

// ErrBinariesMissing is returned (wrapped) when etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler or kubectl is not in the binary
// directory.
var ErrBinariesMissing = errors.New("kubernetes test binaries missing")

// errPortTaken marks a start attempt that lost a race for a loopback port;
// only such attempts are retried.
var errPortTaken = errors.New("port already in use")

// Options tune Start. The zero value starts a bare apiserver with binaries
// from BinDir().
type Options struct {
	// BinDir holds etcd, kube-apiserver and kubectl; default BinDir().
	BinDir string
	// CRDDir, when set, is a directory of CRD manifests installed after the
	// apiserver is ready; Start returns once they are Established and served.
	CRDDir string
	// Keep leaves the working directory (logs, PKI, etcd data) in place on
	// Stop, for debugging.
	Keep bool
	// Log receives progress lines; default io.Discard.
	Log io.Writer
}

// Env is a running etcd + kube-apiserver pair on loopback.
type Env struct {
	// Config is an admin (system:masters) client configuration.
	Config *rest.Config
	// Kubeconfig is the path of a self-contained kubeconfig for Config.
	Kubeconfig string
	// Dir is the working directory: PKI, etcd data, logs, kubeconfig.
	Dir string
	// BinDir is where the binaries were taken from.
	BinDir string
	// StartupTime is the time from starting etcd to the apiserver's /readyz
	// answering ok.
	StartupTime time.Duration
	// CRDTime is the time taken to install the CRDs and see them served.
	CRDTime time.Duration

	procs    []*proc // in stop order: apiserver first, then etcd
	pki      *pki
	apiPath  string
	apiEnv   []string
	apiArgs  []string
	keep     bool
	stopOnce sync.Once
	stopErr  error
}

// proc is one child process and the means to know it has exited.
type proc struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{} // closed once Wait returned
	waitErr error
}

// RepoRoot finds the root of the Switchback module by walking up from the
// working directory, which `go test` sets to the package directory. The
// nested helper module in hack/k8s-testenv has another module path and is
// skipped.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("get working directory: %w", err)
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && modulePathOf(data) == ModulePath {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of module %s above the working directory", ModulePath)
		}
		dir = parent
	}
}

func modulePathOf(gomod []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// BinDir returns $K8S_BIN_DIR if set, else <repo>/.cache/k8s/v<K8sVersion>,
// where `make testenv-bins` puts the binaries.
func BinDir() (string, error) {
	if d := os.Getenv("K8S_BIN_DIR"); d != "" {
		return d, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, ".cache", "k8s", "v"+K8sVersion), nil
}

// CheckBinaries returns an error wrapping ErrBinariesMissing naming every
// missing or non-executable binary in dir.
func CheckBinaries(dir string) error {
	var missing []string
	for _, b := range []string{EtcdBin, APIServerBin, KubectlBin, ControllerManagerBin, SchedulerBin} {
		fi, err := os.Stat(filepath.Join(dir, b))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s not found in %s", ErrBinariesMissing, strings.Join(missing, ", "), dir)
	}
	return nil
}

// Start runs etcd and kube-apiserver on free loopback ports, waits for the
// apiserver's /readyz, and installs the CRDs of opts.CRDDir. On error nothing
// is left running. ctx bounds the whole start.
func Start(ctx context.Context, opts Options) (*Env, error) {
	if opts.BinDir == "" {
		d, err := BinDir()
		if err != nil {
			return nil, err
		}
		opts.BinDir = d
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if err := CheckBinaries(opts.BinDir); err != nil {
		return nil, err
	}
	// Free ports are found by binding :0 and closing, so another process may
	// take one before etcd or the apiserver binds it; that race is rare but
	// real when test packages start in parallel, hence a few attempts.
	const attempts = 3
	var lastErr error
	for i := 1; i <= attempts; i++ {
		env, err := startOnce(ctx, opts)
		if err == nil {
			return env, nil
		}
		lastErr = err
		if !errors.Is(err, errPortTaken) {
			break
		}
		fmt.Fprintf(opts.Log, "testenv: attempt %d lost a port race, retrying: %v\n", i, err)
	}
	return nil, lastErr
}

func startOnce(ctx context.Context, opts Options) (_ *Env, err error) {
	dir, err := os.MkdirTemp("", "switchback-testenv-")
	if err != nil {
		return nil, fmt.Errorf("create work dir: %w", err)
	}
	e := &Env{Dir: dir, BinDir: opts.BinDir, keep: opts.Keep}
	defer func() {
		if err != nil {
			// Keep the logs of a failed start when asked to: they are the
			// only account of why the apiserver did not come up.
			if stopErr := e.Stop(); stopErr != nil {
				err = fmt.Errorf("%w (and stopping: %v)", err, stopErr)
			}
		}
	}()

	p, err := newPKI()
	if err != nil {
		return e, err
	}
	pkiDir := filepath.Join(dir, "pki")
	if err := p.write(pkiDir); err != nil {
		return e, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return e, err
	}
	clientPort, peerPort, apiPort := ports[0], ports[1], ports[2]

	t0 := time.Now()
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(clientPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	if _, err := e.spawn("etcd", filepath.Join(opts.BinDir, EtcdBin), withoutEtcdVars(os.Environ()),
		"--name=testenv",
		"--data-dir="+filepath.Join(dir, "etcd-data"),
		"--listen-client-urls="+etcdURL,
		"--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=testenv="+peerURL,
		// Test data is thrown away: skipping fsync makes etcd writes (and so
		// every apiserver write) several times faster on a shared disk.
		"--unsafe-no-fsync",
		"--quota-backend-bytes="+strconv.Itoa(1<<30),
		"--log-level=warn",
	); err != nil {
		return e, err
	}

	e.pki = p
	e.apiPath, e.apiEnv = filepath.Join(opts.BinDir, APIServerBin), os.Environ()
	e.apiArgs = []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(apiPort),
		"--tls-cert-file=" + filepath.Join(pkiDir, serverCertFile),
		"--tls-private-key-file=" + filepath.Join(pkiDir, serverKeyFile),
		"--client-ca-file=" + filepath.Join(pkiDir, caCertFile),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + filepath.Join(pkiDir, saPubFile),
		"--service-account-signing-key-file=" + filepath.Join(pkiDir, saKeyFile),
		"--service-cluster-ip-range=10.0.0.0/24",
		// No controller-manager runs, so nothing would create the default
		// service account this plugin insists on.
		"--disable-admission-plugins=ServiceAccount",
		"--allow-privileged=true",
		// The default "lease" reconciler publishes the advertise address in
		// the kubernetes Endpoints; a loopback address is refused there.
		"--endpoint-reconciler-type=none",
		"--cert-dir=" + pkiDir,
	}
	if _, err := e.spawn("kube-apiserver", e.apiPath, e.apiEnv, e.apiArgs...); err != nil {
		return e, err
	}

	e.Config = &rest.Config{
		Host: "https://127.0.0.1:" + strconv.Itoa(apiPort),
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   p.caCert,
			CertData: p.adminCert,
			KeyData:  p.adminKey,
		},
		// Tests create objects in bursts; client-side throttling would only
		// add invisible sleeps.
		QPS:   200,
		Burst: 400,
	}
	e.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(e.Kubeconfig, kubeconfig(e.Config.Host, p), 0o600); err != nil {
		return e, fmt.Errorf("write kubeconfig: %w", err)
	}

	if err := e.waitReady(ctx, p); err != nil {
		return e, err
	}
	e.StartupTime = time.Since(t0)
	fmt.Fprintf(opts.Log, "testenv: kube-apiserver ready at %s in %s\n", e.Config.Host, e.StartupTime.Round(time.Millisecond))

	if opts.CRDDir != "" {
		t1 := time.Now()
		if err := InstallCRDs(ctx, e.Config, opts.CRDDir); err != nil {
			return e, err
		}
		e.CRDTime = time.Since(t1)
		fmt.Fprintf(opts.Log, "testenv: CRDs from %s established in %s\n", opts.CRDDir, e.CRDTime.Round(time.Millisecond))
	}
	return e, nil
}

// Kubectl runs the kubectl binary against this environment and returns its
// stdout and stderr. A non-zero exit is returned as an error wrapping
// *exec.ExitError; stderr is then the interesting part.
func (e *Env) Kubectl(ctx context.Context, stdin io.Reader, args ...string) (stdout, stderr string, err error) {
	full := append([]string{
		"--kubeconfig=" + e.Kubeconfig,
		// A private discovery cache: the user's ~/.kube/cache could hold
		// another cluster's answers for the same host:port.
		"--cache-dir=" + filepath.Join(e.Dir, "kubectl-cache"),
	}, args...)
	cmd := exec.CommandContext(ctx, filepath.Join(e.BinDir, KubectlBin), full...)
	var out, errOut bytes.Buffer
	cmd.Stdin = stdin
	cmd.Stdout = &out
	cmd.Stderr = &errOut
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.Kubeconfig)
	if err := cmd.Run(); err != nil {
		return out.String(), errOut.String(), fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
	}
	return out.String(), errOut.String(), nil
}

// kubeconfig renders a self-contained kubeconfig (data embedded) so that it
// stays valid wherever it is copied.
func kubeconfig(host string, p *pki) []byte {
	b64 := base64.StdEncoding.EncodeToString
	return []byte(`apiVersion: v1
kind: Config
clusters:
- name: switchback-testenv
  cluster:
    server: ` + host + `
    certificate-authority-data: ` + b64(p.caCert) + `
users:
- name: admin
  user:
    client-certificate-data: ` + b64(p.adminCert) + `
    client-key-data: ` + b64(p.adminKey) + `
contexts:
- name: switchback-testenv
  context:
    cluster: switchback-testenv
    user: admin
    namespace: default
current-context: switchback-testenv
`)
}

func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	return lastLines(string(data), n)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
