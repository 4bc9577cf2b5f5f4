//go:build linux

package faults

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"iter"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/switchback-dev/switchback/internal/proctest"

	"github.com/stretchr/testify/require"
)

// proc is one switchback process.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	health  string
	done    chan struct{}
	killed  atomic.Bool
	waitErr error
}

// start runs `switchback args...` with its output in a log file of the run.
func (w *world) start(name string, args ...string) *proc {
	w.t.Helper()
	health := proctest.FreeAddr(w.t)
	logPath := filepath.Join(w.dir, fmt.Sprintf("%s-%d.log", name, time.Now().UnixNano()))
	f, err := os.Create(logPath)
	require.NoError(w.t, err)
	bin := binPath
	if w.next.Load() {
		bin = nextBinPath
	}
	cmd := exec.Command(bin, append(args, "--health-addr", health)...)
	cmd.Stdout, cmd.Stderr = f, f
	// The kernel kills the process if the test binary dies without cleanup
	// (a panic, a -timeout): no process outlives the suite.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(w.t, cmd.Start(), "start %s", name)
	p := &proc{name: name, cmd: cmd, logPath: logPath, health: health, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		f.Close()
		if !p.killed.Load() {
			w.mu.Lock()
			w.exited = append(w.exited, fmt.Sprintf("%s (pid %d): %v", name, cmd.Process.Pid, p.waitErr))
			w.mu.Unlock()
		}
		close(p.done)
	}()
	w.mu.Lock()
	w.procs = append(w.procs, p)
	w.mu.Unlock()
	w.t.Logf("started %s (pid %d)", name, cmd.Process.Pid)
	return p
}

// kill9 is kill -9: no cleanup of any kind runs in the process.
func (p *proc) kill9(t *testing.T) {
	t.Helper()
	p.killed.Store(true)
	if err := syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		select {
		case <-p.done:
		default:
			t.Errorf("kill -9 %s: %v", p.name, err)
		}
	}
	<-p.done
	t.Logf("killed %s (pid %d) with SIGKILL", p.name, p.cmd.Process.Pid)
}

// stop is a graceful stop (SIGTERM, as the kubelet sends), waited for.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	p.killed.Store(true)
	p.signal(t, syscall.SIGTERM)
	<-p.done
}

// signal sends sig (SIGSTOP, SIGCONT) to the process.
func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	require.NoError(t, syscall.Kill(p.cmd.Process.Pid, sig), "%v to %s", sig, p.name)
	t.Logf("%v sent to %s (pid %d)", sig, p.name, p.cmd.Process.Pid)
}

// alive reports whether the process still runs.
func (p *proc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// get fetches a path of the process's health endpoint.
func (p *proc) get(path string) (int, string) {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + p.health + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// leading reports whether a controller holds the lease.
func (p *proc) leading() bool {
	code, body := p.get("/leader")
	return code == http.StatusOK && body == "true"
}

// ready reports whether the process is connected to NATS.
func (p *proc) ready() bool {
	code, _ := p.get("/readyz")
	return code == http.StatusOK
}

// readyCount is how many of ps report themselves ready.
func readyCount(ps iter.Seq[*proc]) int {
	n := 0
	for p := range ps {
		if p.ready() {
			n++
		}
	}
	return n
}

// countLines counts the lines of a log holding s.
func countLines(path, s string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return strings.Count(string(b), s)
}

func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// kubeconfig is the controllers' kubeconfig.
func (w *world) kubeconfig() string {
	if w.opts.kubeconfig != "" {
		return w.opts.kubeconfig
	}
	return kenv.Kubeconfig
}

// startController runs `switchback controller` for the run's namespace,
// with leader election on (the lease lives in the run's namespace).
func (w *world) startController(id string) *proc {
	w.t.Helper()
	return w.start("controller-"+id, "controller", "--kubeconfig", w.kubeconfig(), "--nats-url", w.url,
		"--stream-replicas", fmt.Sprint(w.replicas), "--namespace", w.ns, "--id", id, "--leader-elect=true",
		"--webhook-addr", "", "--log-level", "debug", "--data-plane", w.dataPlane(), "--longhorn-namespace", w.ns,
		// Short enough that a dead worker's command and a dead leader's
		// lease come back within seconds, not the production 10 s and 15 s.
		"--command-ack-wait", "2s", "--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline", "3s",
		"--leader-elect-retry-period", "500ms")
}

// startWorker runs `switchback worker` for node.
func (w *world) startWorker(node string) *proc {
	w.t.Helper()
	url := w.url
	if w.opts.workerURL != nil {
		url = w.opts.workerURL(node)
	}
	kubeconfig := kenv.Kubeconfig
	if k, ok := w.holds[node]; ok {
		kubeconfig = k
	}
	return w.start("worker-"+node, "worker", "--node", node, "--nats-url", url, "--stream-replicas", fmt.Sprint(w.replicas),
		"--data-plane", w.dataPlane(), "--kubeconfig", kubeconfig, "--longhorn-namespace", w.ns,
		"--poll-interval", "20ms", "--stall-after", "5s", "--log-level", "debug")
}

// startWorkers starts one worker per node.
func (w *world) startWorkers() map[string]*proc {
	out := map[string]*proc{}
	for _, n := range w.nodes {
		out[n] = w.startWorker(n)
	}
	return out
}

// runCLI runs the switchback binary to completion and returns its exit
// code and combined output.
func (w *world) runCLI(args ...string) (int, string) {
	ctx, cancel := context.WithTimeout(w.ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		}
		return -1, err.Error() + "\n" + string(out)
	}
	return 0, string(out)
}
