package sim

import (
	"fmt"
	"slices"
	"strings"

	"github.com/switchback-dev/switchback/dataplane"
)

// Describe renders the cluster for the demo and for test failures: a header,
// then one line per node (deleted ones included) with its readiness, replica
// scheduling, IMs (short image and state), the targets it hosts (with the
// initiator's node when it is elsewhere, and the destination of a
// switch-over under way) and its replicas, marked ~ rebuilding, - stopped,
// ! error.
func (s *Sim) Describe() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick()
	var b strings.Builder
	fmt.Fprintf(&b, "Longhorn %s · default IM image %s · %d nodes · %d volumes · I/O %d issued, %d failed (%d by actions)\n",
		s.cfg.Profile, shortImage(s.cfg.DefaultIMImage), len(s.nodes), len(s.vols), s.io.issued, s.io.failed, s.io.failed-s.io.failedInjected)
	names := append(slices.Clone(s.nodeNames), sortedKeys(s.deleted)...)
	slices.Sort(names)
	width := 0
	for _, name := range names {
		width = max(width, len(name))
	}
	for _, name := range names {
		n := s.nodes[name]
		if n == nil {
			fmt.Fprintf(&b, "%-*s  deleted\n", width, name)
			continue
		}
		ready := "Ready"
		if !n.ready {
			ready = "NotReady"
		}
		fmt.Fprintf(&b, "%-*s  %-8s", width, name, ready)
		if !n.allowSched {
			b.WriteString("  no-scheduling")
		}
		if !n.v2 {
			b.WriteString("  no-v2")
		}
		var ims []string
		for _, m := range []*im{n.im, n.next} {
			if m != nil {
				ims = append(ims, fmt.Sprintf("%s@%s %s", m.name, shortImage(m.image), m.state))
			}
		}
		if len(ims) > 0 {
			fmt.Fprintf(&b, "  im[%s]", strings.Join(ims, ", "))
		}
		var targets []string
		for _, vol := range sortedKeys(s.targetsOn[name]) {
			v := s.vols[vol]
			t := vol
			if v.attached != name {
				t += "<-" + v.attached
			}
			if v.sw != nil {
				t += "=>" + v.sw.dest
			}
			targets = append(targets, t)
		}
		fmt.Fprintf(&b, "  targets[%s]", strings.Join(targets, " "))
		var replicas []string
		for _, vol := range sortedKeys(s.replicasOn[name]) {
			if r := s.vols[vol].replicaOn(name); r != nil {
				replicas = append(replicas, vol+replicaMark(r.state))
			}
		}
		fmt.Fprintf(&b, "  replicas[%s]\n", strings.Join(replicas, " "))
	}
	return b.String()
}

// String is Describe, so a *Sim prints usefully in test failures.
func (s *Sim) String() string { return s.Describe() }

func replicaMark(st dataplane.ReplicaState) string {
	switch st {
	case dataplane.ReplicaRebuilding:
		return "~"
	case dataplane.ReplicaStopped:
		return "-"
	case dataplane.ReplicaError:
		return "!"
	}
	return ""
}

// shortImage keeps the tag, the part that differs between IM images.
func shortImage(image string) string {
	if i := strings.LastIndexByte(image, ':'); i >= 0 && !strings.Contains(image[i:], "/") {
		return image[i+1:]
	}
	return image
}
