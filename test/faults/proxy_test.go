//go:build linux

package faults

import (
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path"
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

	return p, proxyKubeconfig(t, p.srv.URL, "kubeconfig-conflicts")
}

// conflict writes the apiserver's own 409 answer: a metav1.Status with
// reason Conflict.
func conflict(w http.ResponseWriter, path string) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	name, resource := "", "dataengineupgrademanagers"
	if len(parts) >= 3 {
		name, resource = parts[len(parts)-2], parts[len(parts)-3]
	}
	writeStatus(w, apierrors.NewConflict(schema.GroupResource{Group: "longhorn.io", Resource: resource}, name, errInjected))
}

// writeStatus answers as the apiserver does when it refuses: the error's
// metav1.Status with its code.
func writeStatus(w http.ResponseWriter, e *apierrors.StatusError) {
	st := e.ErrStatus
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(st.Code))
	_ = json.NewEncoder(w).Encode(st)
}

type injectedError struct{}

func (injectedError) Error() string {
	return "the object has been modified; please apply your changes to the latest version and try again (injected)"
}

var errInjected = injectedError{}

// tcpProxy forwards loopback TCP connections to a target (a NATS server,
// the apiserver). cut closes every connection, as a dropped link does (the
// peer sees a reset and reconnects at once); block makes the proxy a black
// hole, as a partition does: nothing passes either way, open connections
// stay open, new ones are accepted and get no answer, so the peer notices
// only by its own timeouts (NATS pings, request deadlines); heal lets
// everything through again, what was held first.
type tcpProxy struct {
	ln       net.Listener
	target   string
	accepted atomic.Int64
	mu       sync.Mutex
	healed   *sync.Cond // signalled when blocked turns false or the proxy closes
	blocked  bool
	closed   bool
	conns    map[net.Conn]struct{}
	wg       sync.WaitGroup
}

func newTCPProxy(t *testing.T, w *world, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &tcpProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.healed = sync.NewCond(&p.mu)
	p.wg.Go(p.serve)
	w.onStop(p.close)
	return p
}

// URL is the proxy's NATS URL.
func (p *tcpProxy) URL() string { return "nats://" + p.ln.Addr().String() }

// Addr is the proxy's host:port.
func (p *tcpProxy) Addr() string { return p.ln.Addr().String() }

func (p *tcpProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.accepted.Add(1)
		p.wg.Go(func() { p.forward(c) })
	}
}

// forward dials the target once the link passes and pipes both ways.
func (p *tcpProxy) forward(c net.Conn) {
	p.mu.Lock()
	p.conns[c] = struct{}{}
	p.mu.Unlock()
	if !p.pass() {
		p.drop(c)
		return
	}
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		p.drop(c)
		return
	}
	p.mu.Lock()
	p.conns[up] = struct{}{}
	p.mu.Unlock()
	p.wg.Go(func() { p.pipe(up, c) })
	p.pipe(c, up)
}

// pipe copies src to dst, holding each chunk while the link is blocked.
// One direction ending ends the connection both ways.
func (p *tcpProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32*1024)
	for {
		n, err := src.Read(buf)
		if n > 0 && (!p.pass() || writeAll(dst, buf[:n]) != nil) {
			break
		}
		if err != nil {
			break
		}
	}
	p.drop(dst)
	p.drop(src)
}

func writeAll(c net.Conn, b []byte) error {
	_, err := c.Write(b)
	return err
}

// pass waits while the link is blocked; false once the proxy closed.
func (p *tcpProxy) pass() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.blocked && !p.closed {
		p.healed.Wait()
	}
	return !p.closed
}

func (p *tcpProxy) drop(c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// cut drops every open connection and returns how many were open (a
// connection and its upstream count once).
func (p *tcpProxy) cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := (len(p.conns) + 1) / 2
	for c := range p.conns {
		c.Close()
	}
	return n
}

// block starts a partition: see tcpProxy.
func (p *tcpProxy) block() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked = true
}

// heal ends the partition.
func (p *tcpProxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked = false
	p.healed.Broadcast()
}

func (p *tcpProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	p.closed = true
	p.healed.Broadcast()
	p.mu.Unlock()
	p.cut()
	p.wg.Wait()
}

// newHoldProxy starts a proxy between one worker and the apiserver that
// passes every request (watches excepted) through the run's gate and its
// data-plane faults: once a node has entered the gate's step, the worker's
// requests wait there, so a worker killed then dies inside the step; a slow
// plane delays every request; a flaky one refuses reads with 503 and
// writes with 409 (the apiserver's answer to a stale write, as Longhorn's
// own controllers racing the worker cause), and answers 504 to a write
// that took effect. It returns the worker's kubeconfig.
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
		ModifyResponse: func(resp *http.Response) error {
			if resp.Request.Method == http.MethodGet || resp.StatusCode >= 300 {
				return nil
			}
			return w.plane.after()
		},
		ErrorHandler: func(rw http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, errAnswerLost) {
				writeStatus(rw, apierrors.NewTimeoutError(err.Error(), 0))
				return
			}
			rw.WriteHeader(http.StatusBadGateway)
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") != "true" {
			w.gate.wait(r.Method + " " + r.URL.Path)
			if err := w.plane.before(); err != nil {
				_, _ = io.Copy(io.Discard, r.Body)
				if r.Method == http.MethodGet {
					writeStatus(rw, apierrors.NewServiceUnavailable(err.Error()))
				} else {
					writeStatus(rw, apierrors.NewConflict(schema.GroupResource{Group: "longhorn.io"}, path.Base(r.URL.Path), err))
				}
				return
			}
		}
		rp.ServeHTTP(rw, r)
	}))
	w.onStop(srv.Close)
	return proxyKubeconfig(t, srv.URL, "kubeconfig-hold")
}

// proxyKubeconfig writes a kubeconfig for a plain-HTTP proxy on loopback
// that holds the admin credentials towards the apiserver.
func proxyKubeconfig(t *testing.T, server, name string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["proxy"] = &clientcmdapi.Cluster{Server: server}
	cfg.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy"}
	cfg.CurrentContext = "proxy"
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, clientcmd.WriteToFile(*cfg, p))
	return p
}

// linkKubeconfig is the apiserver's own kubeconfig with its address
// replaced by addr (a tcpProxy in front of the apiserver: TLS and the
// credentials pass through it untouched).
func linkKubeconfig(t *testing.T, addr string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(kenv.Kubeconfig)
	require.NoError(t, err)
	for _, c := range cfg.Clusters {
		u, err := url.Parse(c.Server)
		require.NoError(t, err)
		u.Host = addr
		c.Server = u.String()
	}
	p := filepath.Join(t.TempDir(), "kubeconfig-link")
	require.NoError(t, clientcmd.WriteToFile(*cfg, p))
	return p
}
