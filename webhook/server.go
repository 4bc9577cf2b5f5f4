package webhook

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
)

// Paths served by the webhook.
const (
	// ValidatePath is where the apiserver posts AdmissionReviews for
	// DataEngineUpgradeManager (clientConfig.service.path).
	ValidatePath = "/validate-dataengineupgrademanager"
	// HealthzPath answers 200 "ok" while the server runs, for probes.
	HealthzPath = "/healthz"
)

// DefaultPort is the controller's webhook port, the targetPort of the
// switchback-webhook Service (deploy/webhook).
const DefaultPort = 9443

// Names of the objects in deploy/webhook, for code that installs or patches
// them (filling the caBundle, creating the Secret). The integration tests
// check them against the manifests.
const (
	// ConfigurationName is the ValidatingWebhookConfiguration's name.
	ConfigurationName = "switchback"
	// WebhookName is the webhook's name in it; the apiserver quotes it in
	// every denial ("admission webhook %q denied the request").
	WebhookName = "validate-dataengineupgrademanager.switchback.longhorn.io"
	// ServiceName is the Service the apiserver calls, in the install's
	// namespace; the serving certificate must name
	// ServiceName.<namespace>.svc (see ServiceDNSNames).
	ServiceName = "switchback-webhook"
	// SecretName is the kubernetes.io/tls Secret holding the serving
	// certificate, mounted into the controller.
	SecretName = "switchback-webhook-tls"
)

// MaxReviewBytes bounds a request body. An AdmissionReview carries the
// object (etcd stores at most 1.5 MiB per object) plus, for updates, the old
// one; anything bigger is not a review the apiserver sent.
const MaxReviewBytes = 4 << 20

// NewHandler returns the webhook's HTTP handler for cfg's deciders:
// ValidatePath, GuardPath when cfg.Guard is set, EvictionScopePath when
// cfg.EvictionScope is, and HealthzPath. It does not recover panics
// (Server does), so that tests and fuzzing see them.
func NewHandler(cfg ServerConfig) http.Handler {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	mux.Handle(ValidatePath, &validateHandler{admit: cfg.Admitter.Admit, log: logger})
	if cfg.Guard != nil {
		mux.Handle(GuardPath, &validateHandler{admit: cfg.Guard.Admit, log: logger})
	}
	if cfg.EvictionScope != nil {
		mux.Handle(EvictionScopePath, &validateHandler{admit: cfg.EvictionScope.Admit, log: logger})
	}
	mux.HandleFunc(HealthzPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok")
	})
	return mux
}

type validateHandler struct {
	admit func(context.Context, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse
	log   *slog.Logger
}

// ServeHTTP answers 200 with an AdmissionReview for every well-formed review
// (the decision is in it), and an HTTP error for anything else: the
// apiserver treats those as a webhook failure, which failurePolicy Fail turns
// into a refusal.
func (h *validateHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	log := h.log.With(slog.String("remote", r.RemoteAddr))
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		httpError(w, log, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed: POST an AdmissionReview")
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			httpError(w, log, http.StatusUnsupportedMediaType, fmt.Sprintf("content type %q not supported: send application/json", ct))
			return
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxReviewBytes))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			httpError(w, log, http.StatusRequestEntityTooLarge, fmt.Sprintf("AdmissionReview larger than %d bytes", MaxReviewBytes))
			return
		}
		httpError(w, log, http.StatusBadRequest, fmt.Sprintf("read AdmissionReview: %v", err))
		return
	}
	review, err := DecodeReview(body)
	if err != nil {
		httpError(w, log, http.StatusBadRequest, err.Error())
		return
	}
	resp := h.admit(r.Context(), review.Request)
	out, err := EncodeResponse(review.Request, resp)
	if err != nil {
		httpError(w, log, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if _, err := w.Write(out); err != nil {
		log.Warn("write AdmissionReview response", slog.Any("error", err))
	}
}

func httpError(w http.ResponseWriter, log *slog.Logger, code int, msg string) {
	log.Warn("bad admission request", slog.Int("code", code), slog.String("error", msg))
	http.Error(w, msg, code)
}

// recoverPanics answers 500 instead of dropping the connection if a handler
// panics, and logs it: one bad request must not look like a webhook outage.
func recoverPanics(next http.Handler, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				log.Error("webhook handler panicked", slog.Any("panic", v), slog.String("path", r.URL.Path))
				http.Error(w, "internal error", http.StatusInternalServerError)
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// ServerConfig is what a Server needs.
type ServerConfig struct {
	// Addr is the listen address of ListenAndServe; empty means
	// ":DefaultPort".
	Addr string
	// CertFile and KeyFile are the serving certificate and key (PEM),
	// reloaded when they change.
	CertFile, KeyFile string
	// Admitter decides the requests for DataEngineUpgradeManagers.
	Admitter *Admitter
	// Guard, when set, decides the requests for Longhorn VolumeAttachments
	// and Volumes (GuardPath).
	Guard *Guard
	// EvictionScope, when set, decides the workers' pod evictions
	// (EvictionScopePath).
	EvictionScope *EvictionScope
	// Logger receives the server's logs; nil discards.
	Logger *slog.Logger
}

// Server is the webhook's HTTPS server.
type Server struct {
	addr    string
	certs   *CertReloader
	handler http.Handler
	log     *slog.Logger
}

// NewServer loads the certificate and prepares the server; it fails if the
// certificate cannot be loaded or no Admitter is given.
func NewServer(cfg ServerConfig) (*Server, error) {
	if cfg.Admitter == nil {
		return nil, errors.New("webhook: new server: no Admitter")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Addr == "" {
		cfg.Addr = fmt.Sprintf(":%d", DefaultPort)
	}
	certs, err := NewCertReloader(cfg.CertFile, cfg.KeyFile, cfg.Logger)
	if err != nil {
		return nil, err
	}
	return &Server{
		addr:    cfg.Addr,
		certs:   certs,
		handler: recoverPanics(NewHandler(cfg), cfg.Logger),
		log:     cfg.Logger,
	}, nil
}

// Certificates returns the server's certificate reloader.
func (s *Server) Certificates() *CertReloader { return s.certs }

// ListenAndServe listens on the configured address and serves until ctx
// ends; see Serve.
func (s *Server) ListenAndServe(ctx context.Context) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.addr)
	if err != nil {
		return fmt.Errorf("webhook: listen on %s: %w", s.addr, err)
	}
	return s.Serve(ctx, ln)
}

// shutdownGrace is how long in-flight reviews get to finish on shutdown; the
// apiserver gives each at most timeoutSeconds (5).
const shutdownGrace = 5 * time.Second

// Serve serves TLS on ln until ctx ends, then shuts down gracefully and
// returns nil; it returns an error if serving fails otherwise. It closes ln.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:   s.handler,
		TLSConfig: s.certs.TLSConfig(),
		// Slow or stuck clients must not pin connections: the apiserver
		// sends a small body at once and waits at most 5 s for the answer.
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    64 << 10,
		// TLS handshake errors from TCP probes and port scans are noise.
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		// Request contexts are not tied to ctx: on shutdown, reviews in
		// flight finish (within shutdownGrace) instead of being cancelled.
	}
	// HTTP/1.1 only; see CertReloader.TLSConfig.
	srv.Protocols = new(http.Protocols)
	srv.Protocols.SetHTTP1(true)

	shutdownErr := make(chan error, 1)
	stop := context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
		defer cancel()
		shutdownErr <- srv.Shutdown(sctx)
	})
	s.log.Info("webhook server listening", slog.String("addr", ln.Addr().String()), slog.String("path", ValidatePath))
	err := srv.ServeTLS(ln, "", "")
	if !errors.Is(err, http.ErrServerClosed) {
		stop()
		_ = srv.Close()
		return fmt.Errorf("webhook: serve: %w", err)
	}
	if err := <-shutdownErr; err != nil {
		return fmt.Errorf("webhook: shutdown: %w", err)
	}
	s.log.Info("webhook server stopped")
	return nil
}
