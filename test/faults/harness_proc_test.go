//go:build linux

package faults

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"iter"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/switchback-dev/switchback/natsembed"
)

// proc is one switchback process.
type proc struct {
	name    string
	args    []string
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
	p, err := w.spawn(name, args)
	require.NoError(w.t, err, "start %s", name)
	w.t.Logf("started %s (pid %d)", name, p.cmd.Process.Pid)
	return p
}

// spawn starts the process (start, and the kubelet's restarts from a
// goroutine of its own, where a test may not fail).
func (w *world) spawn(name string, args []string) (*proc, error) {
	full := slices.Clone(args)
	if w.opts.links {
		// A partition is noticed after two missed pings.
		full = append(full, "--nats-ping-interval", "1s")
	}
	port, err := natsembed.FreePort("127.0.0.1")
	if err != nil {
		return nil, err
	}
	health := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	logPath := filepath.Join(w.dir, fmt.Sprintf("%s-%d.log", name, time.Now().UnixNano()))
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	bin := binPath
	if w.next.Load() {
		bin = nextBinPath
	}
	cmd := exec.Command(bin, append(full, "--health-addr", health)...)
	cmd.Stdout, cmd.Stderr = f, f
	// The kernel kills the process if the test binary dies without cleanup
	// (a panic, a -timeout): no process outlives the suite.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	p := &proc{name: name, args: args, cmd: cmd, logPath: logPath, health: health, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		f.Close()
		if !p.killed.Load() {
			w.exitedOnItsOwn(p)
		}
		close(p.done)
	}()
	w.mu.Lock()
	w.procs = append(w.procs, p)
	w.mu.Unlock()
	return p, nil
}

// exitedOnItsOwn records a process that ended without being killed: a
// finding that fails the run, unless the run has a kubelet (options.kubelet)
// and the process returned an error (exit status 1: e.g. a controller that
// found NATS unreachable as it started), which the kubelet restarts after a
// second, as a pod's container is. A crash (a panic exits with 2, a signal)
// is never restarted.
func (w *world) exitedOnItsOwn(p *proc) {
	code := p.cmd.ProcessState.ExitCode()
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.opts.kubelet || code != 1 || w.stopping {
		w.exited = append(w.exited, fmt.Sprintf("%s (pid %d): %v", p.name, p.cmd.Process.Pid, p.waitErr))
		return
	}
	w.restarts = append(w.restarts, fmt.Sprintf("%s (pid %d) exited 1: %s", p.name, p.cmd.Process.Pid, tail(p.logPath, 1)))
	time.AfterFunc(time.Second, func() {
		w.mu.Lock()
		stopping := w.stopping
		w.mu.Unlock()
		if stopping {
			return
		}
		if _, err := w.spawn(p.name, p.args); err != nil {
			w.mu.Lock()
			w.exited = append(w.exited, fmt.Sprintf("%s: the kubelet's restart failed: %v", p.name, err))
			w.mu.Unlock()
		}
	})
}

// current is the last process started under name.
func (w *world) current(name string) *proc {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := len(w.procs) - 1; i >= 0; i-- {
		if w.procs[i].name == name {
			return w.procs[i]
		}
	}
	return nil
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
	name := "controller-" + id
	url, kubeconfig := w.url, w.kubeconfig()
	if l := w.link(name, true); l != nil {
		url, kubeconfig = l.natsURL(), l.kubeconfig
	}
	return w.start(name, append([]string{"controller", "--kubeconfig", kubeconfig, "--nats-url", url,
		"--stream-replicas", fmt.Sprint(w.replicas), "--namespace", w.ns, "--id", id, "--leader-elect=true",
		"--webhook-addr", "", "--log-level", "debug", "--data-plane", w.dataPlane(), "--longhorn-namespace", w.ns,
		// Short enough that a dead worker's command and a dead leader's
		// lease come back within seconds, not the production 10 s and 15 s.
		"--command-ack-wait", "2s", "--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline", "3s",
		"--leader-elect-retry-period", "500ms"}, w.credentialFlags("", false)...)...)
}

// startWorker runs `switchback worker` for node.
func (w *world) startWorker(node string) *proc {
	w.t.Helper()
	url := w.url
	if w.opts.workerURL != nil {
		url = w.opts.workerURL(node)
	}
	if l := w.link("worker-"+node, false); l != nil {
		url = l.natsURL()
	}
	kubeconfig := kenv.Kubeconfig
	if k, ok := w.holds[node]; ok {
		kubeconfig = k
	}
	return w.start("worker-"+node, append([]string{"worker", "--node", node, "--nats-url", url, "--stream-replicas", fmt.Sprint(w.replicas),
		"--data-plane", w.dataPlane(), "--kubeconfig", kubeconfig, "--longhorn-namespace", w.ns,
		"--poll-interval", "20ms", "--stall-after", "5s", "--log-level", "debug"}, w.credentialFlags(node, false)...)...)
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
