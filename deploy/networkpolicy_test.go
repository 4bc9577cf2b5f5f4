package deploy

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Ports of the rendered pods the matrix probes.
const (
	natsClientPort  = 4222
	natsRoutePort   = 6222
	natsMonitorPort = 8222
	webhookPort     = 9443
	metricsPort     = 8081
)

// apiserverPlaceholder is the address deploy/networkpolicy ships for the
// apiserver: a documentation address standing for "set me".
var apiserverPlaceholder = netip.MustParseAddr("192.0.2.1")

// source is where a connection comes from: a pod (its namespace and
// labels, never nil) or, with nil labels, an address outside the pods, such
// as the apiserver's.
type source struct {
	namespace string
	labels    map[string]string
	ip        netip.Addr
}

func pod(ns string, l map[string]string) source { return source{namespace: ns, labels: l} }
func address(ip netip.Addr) source              { return source{ip: ip} }

// admits evaluates the ingress semantics of NetworkPolicy for a TCP
// connection from src to port on dst: a pod no policy selects for ingress
// takes everything; a selected pod takes what one rule of one selecting
// policy allows, a rule allowing when one of its ports and one of its
// peers match (an empty list matching all).
func admits(t *testing.T, policies []networkingv1.NetworkPolicy, dst workload, port int32, src source) bool {
	t.Helper()
	isolated := false
	for _, np := range policies {
		if np.Namespace != dst.namespace || !hasIngress(np) || !selects(t, &np.Spec.PodSelector, dst.pod.Labels) {
			continue
		}
		isolated = true
		for _, rule := range np.Spec.Ingress {
			if portMatches(t, rule.Ports, &dst, port, corev1.ProtocolTCP) && peerMatches(t, rule.From, np.Namespace, src) {
				return true
			}
		}
	}
	return !isolated
}

// hasIngress: a policy without policyTypes is an ingress policy.
func hasIngress(np networkingv1.NetworkPolicy) bool {
	return len(np.Spec.PolicyTypes) == 0 || slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress)
}

func selects(t *testing.T, sel *metav1.LabelSelector, l map[string]string) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	require.NoError(t, err)
	return s.Matches(labels.Set(l))
}

// portMatches: a rule's ports match port over proto (a port without
// protocol is TCP; an empty list matches all); named ports resolve on dst's
// containers, and never match without dst (egress: the destination is not
// a rendered pod).
func portMatches(t *testing.T, ports []networkingv1.NetworkPolicyPort, dst *workload, port int32, proto corev1.Protocol) bool {
	t.Helper()
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		want := corev1.ProtocolTCP
		if p.Protocol != nil {
			want = *p.Protocol
		}
		if want != proto {
			continue
		}
		if p.Port == nil {
			return true
		}
		if p.Port.Type == intstr.String {
			if dst != nil && namedPort(*dst, p.Port.StrVal) == port {
				return true
			}
			continue
		}
		end := p.Port.IntVal
		if p.EndPort != nil {
			end = *p.EndPort
		}
		if port >= p.Port.IntVal && port <= end {
			return true
		}
	}
	return false
}

// namedPort resolves a port name on the destination's containers (0: none).
func namedPort(w workload, name string) int32 {
	for _, c := range w.pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == name {
				return p.ContainerPort
			}
		}
	}
	return 0
}

// peerMatches: an ipBlock matches addresses; selectors match pods, the pod
// selector alone in the policy's namespace, a namespace selector by the
// namespace's kubernetes.io/metadata.name label.
func peerMatches(t *testing.T, from []networkingv1.NetworkPolicyPeer, policyNS string, src source) bool {
	t.Helper()
	if len(from) == 0 {
		return true
	}
	for _, p := range from {
		if b := p.IPBlock; b != nil {
			if src.ip.IsValid() && inBlock(t, b, src.ip) {
				return true
			}
			continue
		}
		if src.labels == nil {
			continue
		}
		nsOK := src.namespace == policyNS
		if p.NamespaceSelector != nil {
			nsOK = selects(t, p.NamespaceSelector, map[string]string{corev1.LabelMetadataName: src.namespace})
		}
		if nsOK && (p.PodSelector == nil || selects(t, p.PodSelector, src.labels)) {
			return true
		}
	}
	return false
}

func inBlock(t *testing.T, b *networkingv1.IPBlock, ip netip.Addr) bool {
	t.Helper()
	prefix, err := netip.ParsePrefix(b.CIDR)
	require.NoError(t, err)
	if !prefix.Contains(ip) {
		return false
	}
	for _, e := range b.Except {
		ex, err := netip.ParsePrefix(e)
		require.NoError(t, err)
		if ex.Contains(ip) {
			return false
		}
	}
	return true
}

// networkPolicies are the render's NetworkPolicies.
func (m manifests) networkPolicies(t *testing.T) []networkingv1.NetworkPolicy {
	t.Helper()
	var out []networkingv1.NetworkPolicy
	for _, u := range m.ofKind("NetworkPolicy") {
		out = append(out, *decode[networkingv1.NetworkPolicy](t, u.Object))
	}
	require.NotEmpty(t, out, "the render has no NetworkPolicy")
	return out
}

// TestNetworkPolicyMatrix evaluates the shipped policies over the rendered
// pods: who may reach which port of NATS, the controller and the workers.
func TestNetworkPolicyMatrix(t *testing.T) {
	m := render(t, repoPath(t, "deploy"))
	policies := m.networkPolicies(t)
	nats, controller, worker := m.workload(t, natsName), m.workload(t, controllerName), m.workload(t, workerName)

	// The ports probed are the ones the containers serve; the monitoring
	// port is not even declared (it listens on loopback).
	for _, tc := range []struct {
		w     workload
		ports []int32
	}{{nats, []int32{natsClientPort, natsRoutePort}}, {controller, []int32{webhookPort, metricsPort}}, {worker, []int32{metricsPort}}} {
		var declared []int32
		for _, p := range tc.w.container(t).Ports {
			declared = append(declared, p.ContainerPort)
		}
		assert.ElementsMatch(t, tc.ports, declared, "%s's ports", tc.w.name)
	}

	var (
		natsPod       = pod(namespace, nats.pod.Labels)
		controllerPod = pod(namespace, controller.pod.Labels)
		workerPod     = pod(namespace, worker.pod.Labels)
		randomPod     = pod(namespace, map[string]string{"app": "something-else"})
		readerPod     = pod(namespace, map[string]string{"switchback.io/nats-reader": "true"})
		readerElse    = pod("team-b", map[string]string{"switchback.io/nats-reader": "true"})
		prometheus    = pod("monitoring", map[string]string{"app.kubernetes.io/name": "prometheus"})
		otherNSPod    = pod("team-b", map[string]string{"app.kubernetes.io/name": "prometheus"})
		apiserver     = address(apiserverPlaceholder)
		elsewhere     = address(netip.MustParseAddr("10.244.3.7"))
	)
	tests := []struct {
		name string
		src  source
		dst  workload
		port int32
		want bool
	}{
		{"a random pod in the namespace → NATS client", randomPod, nats, natsClientPort, false},
		{"the controller → NATS client", controllerPod, nats, natsClientPort, true},
		{"a worker → NATS client", workerPod, nats, natsClientPort, true},
		{"a labelled reader → NATS client", readerPod, nats, natsClientPort, true},
		{"a labelled reader in another namespace → NATS client", readerElse, nats, natsClientPort, false},
		{"the monitoring namespace → NATS client", prometheus, nats, natsClientPort, false},
		{"the apiserver → NATS client", apiserver, nats, natsClientPort, false},
		{"a worker → NATS routes", workerPod, nats, natsRoutePort, false},
		{"the controller → NATS routes", controllerPod, nats, natsRoutePort, false},
		{"a labelled reader → NATS routes", readerPod, nats, natsRoutePort, false},
		{"a random pod → NATS routes", randomPod, nats, natsRoutePort, false},
		{"NATS → NATS routes", natsPod, nats, natsRoutePort, true},
		{"NATS → NATS monitoring", natsPod, nats, natsMonitorPort, false},
		{"the controller → NATS monitoring", controllerPod, nats, natsMonitorPort, false},
		{"the monitoring namespace → NATS monitoring", prometheus, nats, natsMonitorPort, false},
		{"the apiserver → NATS monitoring", apiserver, nats, natsMonitorPort, false},
		{"the apiserver → the webhook", apiserver, controller, webhookPort, true},
		{"another address → the webhook", elsewhere, controller, webhookPort, false},
		{"a random pod → the webhook", randomPod, controller, webhookPort, false},
		{"a worker → the webhook", workerPod, controller, webhookPort, false},
		{"the apiserver → controller metrics", apiserver, controller, metricsPort, false},
		{"the monitoring namespace → controller metrics", prometheus, controller, metricsPort, true},
		{"the monitoring namespace → worker metrics", prometheus, worker, metricsPort, true},
		{"another namespace → controller metrics", otherNSPod, controller, metricsPort, false},
		{"another namespace → worker metrics", otherNSPod, worker, metricsPort, false},
		{"a random pod → worker metrics", randomPod, worker, metricsPort, false},
		{"the monitoring namespace → the webhook", prometheus, controller, webhookPort, false},
		{"NATS → a worker's other port", natsPod, worker, 9090, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, admits(t, policies, tc.dst, tc.port, tc.src))
		})
	}
}

// TestNetworkPoliciesIsolateEverySwitchbackPod: every rendered workload is
// selected for ingress (a new workload without a policy fails here), and no
// rule is open to every source or every port.
func TestNetworkPoliciesIsolateEverySwitchbackPod(t *testing.T) {
	m := render(t, repoPath(t, "deploy"))
	policies := m.networkPolicies(t)
	for _, w := range m.workloads(t) {
		// From anywhere, on any port, nothing gets through by default.
		assert.False(t, admits(t, policies, w, 1, address(netip.MustParseAddr("203.0.113.9"))), "%s %s is not isolated", w.kind, w.name)
	}
	for _, np := range policies {
		sel := np.Spec.PodSelector
		assert.NotZero(t, len(sel.MatchLabels)+len(sel.MatchExpressions), "%s selects every pod of the namespace (Longhorn's too)", np.Name)
		for i, rule := range np.Spec.Ingress {
			assert.NotEmpty(t, rule.From, "%s rule %d admits every source", np.Name, i)
			assert.NotEmpty(t, rule.Ports, "%s rule %d admits every port", np.Name, i)
		}
	}
}

// TestWebhookPolicyTakesTheApiserverAddress: the patch networkpolicy's
// kustomization documents sets the apiserver's addresses, replacing the
// placeholder.
func TestWebhookPolicyTakesTheApiserverAddress(t *testing.T) {
	dir := overlay(t, nil, `patches:
- target: {kind: NetworkPolicy, name: switchback-webhook-from-apiserver}
  patch: |-
    - {op: replace, path: /spec/ingress/0/from/0/ipBlock/cidr, value: 10.0.0.10/32}
    - {op: add, path: /spec/ingress/0/from/-, value: {ipBlock: {cidr: 10.0.0.11/32}}}
`)
	m := render(t, dir)
	policies, controller := m.networkPolicies(t), m.workload(t, controllerName)
	for ip, want := range map[string]bool{"10.0.0.10": true, "10.0.0.11": true, "10.0.0.12": false, apiserverPlaceholder.String(): false} {
		assert.Equal(t, want, admits(t, policies, controller, webhookPort, address(netip.MustParseAddr(ip))), ip)
	}
}

// sends evaluates the egress semantics of NetworkPolicy for a connection
// from src to port (over proto) at dst: a pod no policy selects for egress
// reaches everything; a selected pod reaches what one rule of one
// selecting policy allows.
func sends(t *testing.T, policies []networkingv1.NetworkPolicy, src workload, dst source, port int32, proto corev1.Protocol) bool {
	t.Helper()
	isolated := false
	for _, np := range policies {
		if np.Namespace != src.namespace || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) || !selects(t, &np.Spec.PodSelector, src.pod.Labels) {
			continue
		}
		isolated = true
		for _, rule := range np.Spec.Egress {
			if portMatches(t, rule.Ports, nil, port, proto) && peerMatches(t, rule.To, np.Namespace, dst) {
				return true
			}
		}
	}
	return !isolated
}

// TestWorkerEgress: a worker reaches NATS, the cluster DNS and the
// apiserver, and nothing else: not Longhorn's unauthenticated manager API,
// its instance managers, the controller or any other pod. The controller's
// egress is not restricted.
func TestWorkerEgress(t *testing.T) {
	m := render(t, repoPath(t, "deploy"))
	policies := m.networkPolicies(t)
	nats, controller, worker := m.workload(t, natsName), m.workload(t, controllerName), m.workload(t, workerName)
	var (
		natsPod         = pod(namespace, nats.pod.Labels)
		controllerPod   = pod(namespace, controller.pod.Labels)
		longhornManager = pod(namespace, map[string]string{"app": "longhorn-manager"})
		instanceManager = pod(namespace, map[string]string{"longhorn.io/component": "instance-manager"})
		coreDNS         = pod("kube-system", map[string]string{"k8s-app": "kube-dns"})
		dnsElsewhere    = pod("team-b", map[string]string{"k8s-app": "kube-dns"})
		apiserver       = address(netip.MustParseAddr("10.0.0.10"))
		apiserverV6     = address(netip.MustParseAddr("fd00::10"))
	)
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	for _, tc := range []struct {
		name  string
		dst   source
		port  int32
		proto corev1.Protocol
		want  bool
	}{
		{"NATS client", natsPod, natsClientPort, tcp, true},
		{"NATS routes", natsPod, natsRoutePort, tcp, false},
		{"the cluster DNS over UDP", coreDNS, 53, udp, true},
		{"the cluster DNS over TCP", coreDNS, 53, tcp, true},
		{"a pod labelled kube-dns in another namespace", dnsElsewhere, 53, udp, false},
		{"the apiserver on 6443", apiserver, 6443, tcp, true},
		{"the apiserver on 443", apiserver, 443, tcp, true},
		{"the apiserver over IPv6", apiserverV6, 6443, tcp, true},
		{"the apiserver's host on another port", apiserver, 10250, tcp, false},
		{"Longhorn's manager API", longhornManager, 9500, tcp, false},
		{"an instance manager", instanceManager, 8500, tcp, false},
		{"the controller's webhook", controllerPod, webhookPort, tcp, false},
		{"the controller's metrics", controllerPod, metricsPort, tcp, false},
	} {
		assert.Equal(t, tc.want, sends(t, policies, worker, tc.dst, tc.port, tc.proto), "a worker → %s", tc.name)
	}
	assert.True(t, sends(t, policies, controller, longhornManager, 9500, tcp), "the controller's egress is not restricted")
}

// TestWorkerEgressTakesTheApiserverAddress: the patch networkpolicy's
// kustomization documents narrows the apiserver rule to its endpoints.
func TestWorkerEgressTakesTheApiserverAddress(t *testing.T) {
	dir := overlay(t, nil, `patches:
- target: {kind: NetworkPolicy, name: switchback-worker-egress}
  patch: |-
    - {op: replace, path: /spec/egress/2/to, value: [{ipBlock: {cidr: 10.0.0.10/32}}]}
`)
	m := render(t, dir)
	policies, worker := m.networkPolicies(t), m.workload(t, workerName)
	for ip, want := range map[string]bool{"10.0.0.10": true, "10.0.0.11": false, "203.0.113.9": false} {
		assert.Equal(t, want, sends(t, policies, worker, address(netip.MustParseAddr(ip)), 6443, corev1.ProtocolTCP), ip)
	}
}
