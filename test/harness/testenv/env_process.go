package testenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/switchback-dev/switchback/natsembed"
)

// spawn starts one server with its output in <Dir>/<name>.log.
func (e *Env) spawn(name, path string, env []string, args ...string) (*proc, error) {
	logPath := filepath.Join(e.Dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create %s log: %w", name, err)
	}
	cmd := exec.Command(path, args...)
	cmd.Env = env
	cmd.Dir = e.Dir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	setProcAttrs(cmd)
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	// Prepended, so that Stop goes in reverse start order: the apiserver
	// stops before etcd and never sees its storage vanish under it.
	e.procs = append([]*proc{p}, e.procs...)
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// withoutEtcdVars drops ETCD_* variables: etcd reads each of them as a flag,
// so a stray ETCD_NAME or ETCD_DATA_DIR in the caller's environment would
// silently change (or, when it clashes with a flag, break) the test etcd.
func withoutEtcdVars(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, "ETCD_") {
			out = append(out, kv)
		}
	}
	return out
}

// freePorts picks n distinct loopback ports for the servers to bind
// (natsembed.FreePort: from outside the range outgoing connections take).
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for len(ports) < n {
		p, err := natsembed.FreePort("127.0.0.1")
		if err != nil {
			return nil, fmt.Errorf("find a free loopback port: %w", err)
		}
		if !slices.Contains(ports, p) {
			ports = append(ports, p)
		}
	}
	return ports, nil
}

// waitReady polls the apiserver's /readyz until it answers 200, a server
// exits, or ctx ends. /readyz (not /healthz) is used because it waits for the
// post-start hooks, e.g. the bootstrap RBAC roles the admin identity relies on.
func (e *Env) waitReady(ctx context.Context, p *pki) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.caCert)
	cert, err := tls.X509KeyPair(p.adminCert, p.adminKey)
	if err != nil {
		return fmt.Errorf("load admin key pair: %w", err)
	}
	client := &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs:      pool,
			Certificates: []tls.Certificate{cert},
			MinVersion:   tls.VersionTLS12,
		}},
	}
	defer client.CloseIdleConnections()

	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last string
	for {
		for _, pr := range e.procs {
			select {
			case <-pr.done:
				return pr.exitError()
			default:
			}
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.Config.Host+"/readyz", nil)
		if err != nil {
			return fmt.Errorf("build readyz request: %w", err)
		}
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, lastLines(string(body), 10))
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kube-apiserver not ready (last answer: %s); log tail:\n%s: %w",
				last, tailFile(filepath.Join(e.Dir, "kube-apiserver.log"), 30), ctx.Err())
		case <-tick.C:
		}
	}
}

// exitError describes a server that exited during start, with its log tail,
// and marks it errPortTaken when it lost a port race.
func (p *proc) exitError() error {
	tail := tailFile(p.logPath, 30)
	err := fmt.Errorf("%s exited during start (%v); log tail:\n%s", p.name, p.waitErr, tail)
	if strings.Contains(tail, "address already in use") {
		return fmt.Errorf("%w: %w", errPortTaken, err)
	}
	return err
}

// Stop stops the apiserver, then etcd: SIGTERM, then SIGKILL after a grace
// period. It removes the working directory unless Keep was set, and is safe
// to call more than once.
func (e *Env) Stop() error {
	e.stopOnce.Do(func() {
		var errs []error
		for _, p := range e.procs {
			if err := p.stop(10 * time.Second); err != nil {
				errs = append(errs, err)
			}
		}
		if !e.keep {
			if err := os.RemoveAll(e.Dir); err != nil {
				errs = append(errs, fmt.Errorf("remove %s: %w", e.Dir, err))
			}
		}
		e.stopErr = errors.Join(errs...)
	})
	return e.stopErr
}

// StopAPIServer stops the kube-apiserver (etcd keeps running), for tests of
// an apiserver outage; StartAPIServer brings it back on the same address.
func (e *Env) StopAPIServer() error {
	for _, p := range e.procs {
		if p.name == "kube-apiserver" {
			return p.stop(10 * time.Second)
		}
	}
	return errors.New("testenv: no kube-apiserver")
}

// StartAPIServer starts the kube-apiserver again after StopAPIServer and
// waits until it is ready.
func (e *Env) StartAPIServer(ctx context.Context) error {
	for i, p := range e.procs {
		if p.name == "kube-apiserver" {
			select {
			case <-p.done:
			default:
				return errors.New("testenv: kube-apiserver is running")
			}
			e.procs = append(e.procs[:i:i], e.procs[i+1:]...)
			break
		}
	}
	if _, err := e.spawn("kube-apiserver", e.apiPath, e.apiEnv, e.apiArgs...); err != nil {
		return err
	}
	return e.waitReady(ctx, e.pki)
}

// Pids returns the process ids of the running servers, apiserver first.
// Tests use it to prove nothing is left behind.
func (e *Env) Pids() []int {
	pids := make([]int, 0, len(e.procs))
	for _, p := range e.procs {
		pids = append(pids, p.cmd.Process.Pid)
	}
	return pids
}

func (p *proc) stop(grace time.Duration) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := signalGroup(p.cmd.Process, syscall.SIGTERM); err != nil {
		return fmt.Errorf("terminate %s: %w", p.name, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	if err := signalGroup(p.cmd.Process, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill %s: %w", p.name, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s (pid %d) still running after SIGKILL", p.name, p.cmd.Process.Pid)
	}
}
