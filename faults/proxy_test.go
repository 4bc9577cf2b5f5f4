//go:build linux

package faults

import (
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// conflictProxy sits between the controller and the apiserver and answers
// 409 Conflict, as an apiserver does to a stale resourceVersion, to every
// every-th write (PUT or PATCH) of a Switchback object's status; the rest
// is passed through, watches included.
type conflictProxy struct {
	srv      *httptest.Server
	every    int64
	writes   atomic.Int64
	injected atomic.Int64
}

// newConflictProxy starts the proxy and returns it with a kubeconfig that
// points at it (plain HTTP on loopback; the proxy holds the admin
// credentials towards the apiserver).
func newConflictProxy(t *testing.T, w *world, every int64) (*conflictProxy, string) {
	t.Helper()
	target, err := url.Parse(kenv.Config.Host)
	require.NoError(t, err)
	transport, err := rest.TransportFor(kenv.Config)
	require.NoError(t, err)
	p := &conflictProxy{every: every}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport:     transport,
		FlushInterval: -1, // watches stream
	}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if (r.Method == http.MethodPut || r.Method == http.MethodPatch) &&
			strings.HasPrefix(r.URL.Path, "/apis/longhorn.io/") && strings.HasSuffix(r.URL.Path, "/status") &&
			p.writes.Add(1)%p.every == 0 {
			p.injected.Add(1)
			_, _ = io.Copy(io.Discard, r.Body)
			conflict(w, r.URL.Path)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	// Closed once the controller is dead: Close waits for its watches.
	w.onStop(p.srv.Close)

	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["proxy"] = &clientcmdapi.Cluster{Server: p.srv.URL}
	cfg.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy"}
	cfg.CurrentContext = "proxy"
	path := filepath.Join(t.TempDir(), "kubeconfig-conflicts")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return p, path
}

// conflict writes the apiserver's own 409 answer: a metav1.Status with
// reason Conflict.
func conflict(w http.ResponseWriter, path string) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	name, resource := "", "dataengineupgrademanagers"
	if len(parts) >= 3 {
		name, resource = parts[len(parts)-2], parts[len(parts)-3]
	}
	st := apierrors.NewConflict(schema.GroupResource{Group: "longhorn.io", Resource: resource}, name,
		errInjected).ErrStatus
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusConflict)
	_ = json.NewEncoder(w).Encode(st)
}

type injectedError struct{}

func (injectedError) Error() string {
	return "the object has been modified; please apply your changes to the latest version and try again (injected)"
}

var errInjected = injectedError{}

// tcpProxy forwards loopback TCP connections to a target (a NATS server);
// cut closes every connection, as a network drop between a worker and NATS
// does, while new connections are still accepted.
type tcpProxy struct {
	ln       net.Listener
	target   string
	accepted atomic.Int64
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	wg       sync.WaitGroup
}

func newTCPProxy(t *testing.T, w *world, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &tcpProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.serve)
	w.onStop(p.close)
	return p
}

// URL is the proxy's NATS URL.
func (p *tcpProxy) URL() string { return "nats://" + p.ln.Addr().String() }

func (p *tcpProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.accepted.Add(1)
		pipe := func(dst, src net.Conn) {
			_, _ = io.Copy(dst, src)
			// One direction ending ends the connection both ways.
			dst.Close()
			src.Close()
			p.mu.Lock()
			delete(p.conns, dst)
			delete(p.conns, src)
			p.mu.Unlock()
		}
		p.wg.Go(func() { pipe(up, c) })
		p.wg.Go(func() { pipe(c, up) })
	}
}

// cut drops every open connection and returns how many were open.
func (p *tcpProxy) cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.conns) / 2
	for c := range p.conns {
		c.Close()
	}
	return n
}

func (p *tcpProxy) close() {
	p.ln.Close()
	p.cut()
	p.wg.Wait()
}

// newHoldProxy starts a proxy between one worker and the apiserver that
// passes every request through the run's gate (watches excepted): once a
// node has entered the gate's step, the worker's requests wait there, so a
// worker killed then dies inside the step. It returns the worker's
// kubeconfig.
func newHoldProxy(t *testing.T, w *world) string {
	t.Helper()
	target, err := url.Parse(kenv.Config.Host)
	require.NoError(t, err)
	transport, err := rest.TransportFor(kenv.Config)
	require.NoError(t, err)
	rp := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport:     transport,
		FlushInterval: -1, // watches stream
		// A killed worker's requests end with "context canceled": expected.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") != "true" {
			w.gate.wait(r.Method + " " + r.URL.Path)
		}
		rp.ServeHTTP(rw, r)
	}))
	w.onStop(srv.Close)
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["proxy"] = &clientcmdapi.Cluster{Server: srv.URL}
	cfg.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy"}
	cfg.CurrentContext = "proxy"
	path := filepath.Join(t.TempDir(), "kubeconfig-hold")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return path
}
