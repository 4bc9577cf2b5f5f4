package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/rest"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/longhorn"
	"github.com/switchback-dev/switchback/metrics"
	"github.com/switchback-dev/switchback/sim/simremote"
	"github.com/switchback-dev/switchback/topology"
)

// logFlags choose the log format and level.
type logFlags struct {
	level  string
	format string
}

func (f *logFlags) register(fs *pflag.FlagSet) {
	inSection(fs, flagsLogging, func() {
		fs.StringVar(&f.level, "log-level", "info", "log level: debug, info, warn or error")
		fs.StringVar(&f.format, "log-format", "text", "log format: text or json")
	})
}

func (f *logFlags) logger(w io.Writer) *slog.Logger {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(f.level)); err != nil {
		lvl = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: lvl}
	if f.format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// dataPlaneFlags choose the cluster the engine reads and drives.
type dataPlaneFlags struct {
	kind              string
	namespace         string
	allowExperimental bool
}

func (f *dataPlaneFlags) register(fs *pflag.FlagSet) {
	inSection(fs, flagsDataPlane, func() {
		fs.StringVar(&f.kind, "data-plane", "longhorn", "the cluster: longhorn (Longhorn's custom resources) or sim (a simulated cluster served on NATS, e.g. by the demo: only when asked)")
	})
	f.registerLonghorn(fs)
}

// workerExtraPublish is what the workers of this data plane publish besides
// their own node's subjects: the simulated cluster's requests for sim.
func (f *dataPlaneFlags) workerExtraPublish() []string {
	if f.kind == "sim" {
		return []string{topology.SimSubjects}
	}
	return nil
}

// registerLonghorn registers the flags of --data-plane longhorn alone, for
// a command whose other data plane is its own.
func (f *dataPlaneFlags) registerLonghorn(fs *pflag.FlagSet) {
	// -n, as kubectl's, on a command with no namespace of its own (the
	// controller's -n is its managers').
	short := "n"
	if fs.ShorthandLookup(short) != nil {
		short = ""
	}
	inSection(fs, flagsDataPlane, func() {
		fs.StringVarP(&f.namespace, "longhorn-namespace", short, longhorn.DefaultNamespace, "with --data-plane longhorn: Longhorn's namespace")
		fs.BoolVar(&f.allowExperimental, "allow-experimental-longhorn", false,
			"with --data-plane longhorn: accept a Longhorn that updates instance managers in place (experimental: how attached volumes' initiators survive it is not established on any release)")
	})
}

// longhorn detects the cluster's Longhorn and returns the adapter over it;
// its informers stop with ctx.
func (f *dataPlaneFlags) longhorn(ctx context.Context, cfg *rest.Config, log *slog.Logger) (*longhorn.Plane, error) {
	return longhorn.NewForConfig(ctx, cfg, longhorn.Options{Namespace: f.namespace, Log: log, AllowExperimental: f.allowExperimental})
}

// awaitLonghorn is longhorn for a process that runs until stopped (the
// controller, a worker): a Longhorn it cannot drive is refused at once;
// anything else (the apiserver unreachable or restarting, a missing
// permission) is tried again until ctx ends, where a one-shot command
// fails.
func (f *dataPlaneFlags) awaitLonghorn(ctx context.Context, cfg *rest.Config, log *slog.Logger) (*longhorn.Plane, error) {
	var lastLog time.Time
	for {
		p, err := f.longhorn(ctx, cfg, log)
		if err == nil || errors.Is(err, longhorn.ErrUnsupportedLonghorn) || errors.Is(err, longhorn.ErrExperimentalLonghorn) {
			return p, err
		}
		if time.Since(lastLog) >= time.Minute {
			log.Warn("cannot read Longhorn through the Kubernetes API yet; trying again", "error", err)
			lastLog = time.Now()
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("longhorn: %w (last error: %w)", ctx.Err(), err)
		case <-time.After(bindRetry):
		}
	}
}

// open returns the data plane (cfg is needed for longhorn; nc for sim) and
// reports the Longhorn it drives in the log and the longhorn_profile metric.
func (f *dataPlaneFlags) open(ctx context.Context, cfg *rest.Config, nc *nats.Conn, log *slog.Logger) (dataplane.DataPlane, error) {
	var dp dataplane.DataPlane
	switch f.kind {
	case "longhorn":
		if cfg == nil {
			return nil, errors.New("--data-plane longhorn needs a Kubernetes configuration (--kubeconfig or in-cluster)")
		}
		plane, err := f.awaitLonghorn(ctx, cfg, log)
		if err != nil {
			return nil, err
		}
		dp = plane
	case "sim":
		dp = simremote.NewClient(nc, topology.SimPrefix)
	default:
		return nil, fmt.Errorf("--data-plane %q: want longhorn or sim: %w", f.kind, errUsage)
	}
	// A simulated cluster may not be served yet: then only each upgrade's
	// history says which profile it ran against.
	p, err := dp.Platform(ctx)
	if err != nil {
		log.Warn("data plane does not answer yet: its Longhorn profile is not reported here", "kind", f.kind, "error", err)
		return dp, nil
	}
	log.Info("data plane", "kind", f.kind, "longhorn", p.String(), "profile", p.Profile, "evidence", p.Evidence)
	metrics.LonghornProfile.WithLabelValues(string(p.Profile), p.LonghornVersion).Set(1)
	return dp, nil
}

// metricsHandler mounts the Prometheus endpoint: Switchback's series
// (metrics.Registry) and the process's own collectors (metrics.NewReady,
// metrics.NewLeader), which describe this process alone and so are
// registered per endpoint, never in the shared registry.
func metricsHandler(own ...prometheus.Collector) func(*http.ServeMux) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(own...)
	h := promhttp.HandlerFor(prometheus.Gatherers{metrics.Registry, reg}, promhttp.HandlerOpts{})
	return func(mux *http.ServeMux) { mux.Handle("/metrics", h) }
}

// healthFlags serve /healthz, /readyz (and /metrics where a command adds it).
type healthFlags struct {
	addr string
}

func (f *healthFlags) register(fs *pflag.FlagSet) {
	inSection(fs, flagsHealth, func() {
		fs.StringVar(&f.addr, "health-addr", ":8081", "address of /healthz, /readyz and /metrics (empty = none)")
	})
}

// healthServer is the running endpoint.
type healthServer struct {
	srv  *http.Server
	Addr string
}

// Close stops the server.
func (h *healthServer) Close() {
	if h == nil || h.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = h.srv.Shutdown(ctx)
}

// serve starts the endpoint: /healthz answers while the process runs,
// /readyz while ready() returns nil; extra handlers are mounted too.
func (f *healthFlags) serve(ctx context.Context, log *slog.Logger, ready func() error, extra ...func(*http.ServeMux)) (*healthServer, error) {
	if f.addr == "" {
		return &healthServer{}, nil
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	for _, e := range extra {
		e(mux)
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("health endpoint stopped", "error", err)
		}
	}()
	return &healthServer{srv: srv, Addr: ln.Addr().String()}, nil
}

// stringList is a repeatable, comma-separable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

// Type names the value in the help, as pflag's own string slices.
func (l *stringList) Type() string { return "strings" }

func (l *stringList) Set(v string) error {
	for p := range strings.SplitSeq(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l = append(*l, p)
		}
	}
	return nil
}
