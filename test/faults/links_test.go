//go:build linux

package faults

import (
	"strings"
)

// link is how one process reaches the rest of the run: a tcpProxy to each
// NATS server and, for a controller, one to the apiserver (a worker on the
// Longhorn path reaches the apiserver through its hold proxy, where the
// data-plane faults play). A process restarted under the same name keeps
// its links, as a pod restarted on a partitioned node stays partitioned.
type link struct {
	nats       []*tcpProxy
	api        *tcpProxy
	kubeconfig string
}

// link returns name's links (created on first use), or nil when the run
// has none (options.links).
func (w *world) link(name string, apiserver bool) *link {
	if !w.opts.links {
		return nil
	}
	w.mu.Lock()
	l := w.links[name]
	w.mu.Unlock()
	if l != nil {
		return l
	}
	l = &link{}
	for u := range strings.SplitSeq(w.url, ",") {
		l.nats = append(l.nats, newTCPProxy(w.t, w, strings.TrimPrefix(u, "nats://")))
	}
	if apiserver {
		l.api = newTCPProxy(w.t, w, strings.TrimPrefix(kenv.Config.Host, "https://"))
		l.kubeconfig = linkKubeconfig(w.t, l.api.Addr())
	}
	w.mu.Lock()
	if w.links == nil {
		w.links = map[string]*link{}
	}
	w.links[name] = l
	w.mu.Unlock()
	return l
}

// natsURL is the process's --nats-url: its proxies.
func (l *link) natsURL() string {
	urls := make([]string, len(l.nats))
	for i, p := range l.nats {
		urls[i] = p.URL()
	}
	return strings.Join(urls, ",")
}

// partitionNATS black-holes every NATS link of the process; healNATS ends it.
func (l *link) partitionNATS() {
	for _, p := range l.nats {
		p.block()
	}
}

func (l *link) healNATS() {
	for _, p := range l.nats {
		p.heal()
	}
}
