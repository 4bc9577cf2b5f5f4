package sim

import (
	"slices"

	"github.com/switchback-dev/switchback/dataplane"
)

func addIdx(idx map[string]map[string]struct{}, key, vol string) {
	set := idx[key]
	if set == nil {
		set = map[string]struct{}{}
		idx[key] = set
	}
	set[vol] = struct{}{}
}

func delIdx(idx map[string]map[string]struct{}, key, vol string) {
	if set := idx[key]; set != nil {
		delete(set, vol)
		if len(set) == 0 {
			delete(idx, key)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// setTarget moves the volume's current target, keeping the index in step;
// the engine starts in the node's IM.
func (s *Sim) setTarget(v *volume, nodeName string) {
	defer s.rehost(v, v.targetHost())
	if v.target != "" {
		delIdx(s.targetsOn, v.target, v.name)
		s.imCheck[v.target] = struct{}{}
	}
	v.target = nodeName
	v.targetIM = binding{}
	if nodeName != "" {
		addIdx(s.targetsOn, nodeName, v.name)
		v.targetIM = s.nodes[nodeName].bind()
	}
	s.markVolume(v.name)
}

func (s *Sim) setAttached(v *volume, nodeName string) {
	s.accountWrites(v, s.now())
	defer s.rehost(v, v.targetHost())
	if v.attached != "" {
		delIdx(s.attachedOn, v.attached, v.name)
		s.imCheck[v.attached] = struct{}{}
		s.attached--
	}
	v.attached = nodeName
	v.initiator = binding{}
	if nodeName != "" {
		addIdx(s.attachedOn, nodeName, v.name)
		s.attached++
		if v.engine == EngineV2 && !s.cfg.Profile.InitiatorsSurviveIM() {
			v.initiator = s.nodes[nodeName].bind()
		}
	}
	s.markVolume(v.name)
}

// targetHost is export().TargetHost() without exporting the replicas.
func (v *volume) targetHost() string {
	return dataplane.Volume{DataEngine: v.engine, AttachedNode: v.attached, TargetNode: v.target}.TargetHost()
}

// rehost moves v's count in hosted from the node it was hosted on before a
// change (was) to where it is hosted now.
func (s *Sim) rehost(v *volume, was string) {
	now := v.targetHost()
	if now == was {
		return
	}
	if was != "" {
		if s.hosted[was]--; s.hosted[was] == 0 {
			delete(s.hosted, was)
		}
	}
	if now != "" {
		s.hosted[now]++
	}
}

// markNode flags for I/O re-evaluation every volume whose path crosses the
// node, and the node for Longhorn's check of its old-image IM.
func (s *Sim) markNode(name string) {
	for _, idx := range []map[string]map[string]struct{}{s.targetsOn, s.attachedOn, s.replicasOn, s.migratingTo} {
		for vol := range idx[name] {
			s.markVolume(vol)
		}
	}
	s.imCheck[name] = struct{}{}
}
