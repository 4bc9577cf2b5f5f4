// Package natsreload has a nats-server read its configuration again when
// the files it reads change, as `nats-server --signal reload` does: the
// sidecar of the NATS pods (switchback nats-reloader), which share their
// process namespace, so that a Secret applied or rewritten (the node
// accounts the controller renders, package nodeaccounts) reaches the
// servers without a restart.
//
// Each change is loaded twice. nats-server 2.15 creates an account that a
// reload adds but subscribes its service imports only on the next reload
// (docs/security.md §12); the second reload of the same files takes the
// path of an existing account. Each reload is confirmed by the server's
// monitoring (varz config_load_time) before the next.
package natsreload

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Defaults of Config.
const (
	DefaultInterval    = 5 * time.Second
	DefaultProcessName = "nats-server"
	DefaultMonitorURL  = "http://127.0.0.1:8222"
	// DefaultReloadTimeout bounds the wait for a reload to show in varz.
	DefaultReloadTimeout = 30 * time.Second
	// Reloads is how many times a change is loaded.
	Reloads = 2
)

// Config of a Reloader.
type Config struct {
	// Watch are the directories whose files the server reads (its main
	// configuration and what it includes); a Secret or ConfigMap volume's
	// hidden entries (..data, ..2026_…) are followed through the visible
	// names only.
	Watch []string
	// Interval between two looks at the files; default DefaultInterval.
	Interval time.Duration
	// ProcessName is the server's command name in /proc (comm); default
	// DefaultProcessName.
	ProcessName string
	// MonitorURL is the server's monitoring endpoint; default
	// DefaultMonitorURL.
	MonitorURL string
	// ReloadTimeout; default DefaultReloadTimeout.
	ReloadTimeout time.Duration
	// Proc is the proc file system's root; default /proc.
	Proc string
	// Log; default slog.Default().
	Log *slog.Logger
}

// Reloader watches the files and reloads the server.
type Reloader struct {
	cfg    Config
	log    *slog.Logger
	client *http.Client
	// loaded is the digest of the files as the server read them: as New
	// found them, the server having started from them beside it.
	loaded string
}

// New checks cfg and returns a Reloader.
func New(cfg Config) (*Reloader, error) {
	if len(cfg.Watch) == 0 {
		return nil, errors.New("natsreload: at least one directory to watch")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.ProcessName == "" {
		cfg.ProcessName = DefaultProcessName
	}
	if cfg.MonitorURL == "" {
		cfg.MonitorURL = DefaultMonitorURL
	}
	if cfg.ReloadTimeout <= 0 {
		cfg.ReloadTimeout = DefaultReloadTimeout
	}
	if cfg.Proc == "" {
		cfg.Proc = "/proc"
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	r := &Reloader{cfg: cfg, log: cfg.Log.With("component", "nats-reloader"), client: &http.Client{Timeout: 5 * time.Second}}
	var err error
	if r.loaded, err = r.Digest(); err != nil {
		return nil, err
	}
	return r, nil
}

// Run looks at the files every Interval until ctx ends; a change is loaded
// Reloads times. A reload that fails (no server yet, its monitoring not
// answering) is tried again at the next look.
func (r *Reloader) Run(ctx context.Context) error {
	loaded := r.loaded
	r.log.Info("watching the NATS server's configuration", "dirs", r.cfg.Watch, "digest", loaded[:12])
	tick := time.NewTicker(r.cfg.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		now, err := r.Digest()
		if err != nil {
			r.log.Error("reading the configuration", "error", err)
			continue
		}
		if now == loaded {
			continue
		}
		if err := r.Reload(ctx); err != nil {
			r.log.Error("reloading the NATS server", "digest", now[:12], "error", err)
			continue
		}
		r.log.Info("the NATS server loaded its changed configuration", "digest", now[:12], "reloads", Reloads)
		loaded = now
	}
}

// Digest is a hash of every file under the watched directories (names
// and contents, in order), following symbolic links: a Secret or ConfigMap
// volume's visible names are links into its hidden ..data directory, which
// the kubelet swaps on an update.
func (r *Reloader) Digest() (string, error) {
	h := sha256.New()
	for _, dir := range r.cfg.Watch {
		files, err := listFiles(dir)
		if err != nil {
			return "", err
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return "", fmt.Errorf("natsreload: %w", err)
			}
			fmt.Fprintf(h, "%s\x00%d\x00", f, len(b))
			h.Write(b)
		}
	}
	return fmt.Sprintf("%x", h.Sum(nil)), nil
}

// listFiles lists the regular files under dir, in order, through links,
// skipping the hidden entries ("..data", "..2026_…") a volume's visible
// names lead into.
func listFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("natsreload: %w", err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		info, err := os.Stat(path) // through a link
		if err != nil {
			return nil, fmt.Errorf("natsreload: %w", err)
		}
		if info.IsDir() {
			sub, err := listFiles(path)
			if err != nil {
				return nil, err
			}
			out = append(out, sub...)
		} else if info.Mode().IsRegular() {
			out = append(out, path)
		}
	}
	return out, nil
}

// Reload signals the server to read its configuration Reloads times,
// each confirmed by varz before the next.
func (r *Reloader) Reload(ctx context.Context) error {
	pid, err := r.findServer()
	if err != nil {
		return err
	}
	for i := range Reloads {
		before, err := r.loadTime(ctx)
		if err != nil {
			return err
		}
		if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
			return fmt.Errorf("natsreload: signal %s (pid %d): %w", r.cfg.ProcessName, pid, err)
		}
		if err := r.awaitLoad(ctx, before); err != nil {
			return fmt.Errorf("natsreload: reload %d of %d: %w", i+1, Reloads, err)
		}
	}
	return nil
}

func (r *Reloader) awaitLoad(ctx context.Context, before time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.ReloadTimeout)
	defer cancel()
	for {
		at, err := r.loadTime(ctx)
		if err == nil && at.After(before) {
			return nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = errors.New("the server did not load its configuration (see its log: a configuration it refuses is not loaded)")
			}
			return fmt.Errorf("%w: %w", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// loadTime is varz's config_load_time.
func (r *Reloader) loadTime(ctx context.Context) (time.Time, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(r.cfg.MonitorURL, "/")+"/varz", nil)
	if err != nil {
		return time.Time{}, fmt.Errorf("natsreload: %w", err)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return time.Time{}, fmt.Errorf("natsreload: the server's monitoring: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return time.Time{}, fmt.Errorf("natsreload: the server's monitoring answered %s", resp.Status)
	}
	var v struct {
		ConfigLoadTime time.Time `json:"config_load_time"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return time.Time{}, fmt.Errorf("natsreload: varz: %w", err)
	}
	return v.ConfigLoadTime, nil
}

// findServer is the pid of the one process named ProcessName.
func (r *Reloader) findServer() (int, error) {
	entries, err := os.ReadDir(r.cfg.Proc)
	if err != nil {
		return 0, fmt.Errorf("natsreload: %w", err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join(r.cfg.Proc, e.Name(), "comm"))
		if err == nil && strings.TrimSpace(string(comm)) == r.cfg.ProcessName {
			pids = append(pids, pid)
		}
	}
	switch len(pids) {
	case 0:
		return 0, fmt.Errorf("natsreload: no process %s (the pod must share its process namespace)", r.cfg.ProcessName)
	case 1:
		return pids[0], nil
	}
	return 0, fmt.Errorf("natsreload: %d processes named %s (%v): which to reload?", len(pids), r.cfg.ProcessName, pids)
}
