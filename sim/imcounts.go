package sim

// imCounts keeps what each node's serving IM runs (Sim.instances) as
// counts, updated from the volumes changed since they were last read: a
// cluster-wide IM read (a placement's, at each observation of a
// switch-over) asks them of every node, and counting every volume there at
// every read made a 1000-node upgrade's steps cost more than a 100-node
// one's.
type imCounts struct {
	byNode map[string]*instanceCount
	// at is where each volume counts, as last computed.
	at map[string][]countAt
	// dirty are the volumes changed since: every change that can move
	// what an IM runs marks its volume (markVolume, markNode).
	dirty map[string]struct{}
}

// instanceCount is what one node's serving IM runs.
type instanceCount struct{ engines, frontends, replicas int }

// countAt is one instance a volume has on a node.
type countAt struct {
	node string
	kind instanceKind
}

type instanceKind int

const (
	engineInstance instanceKind = iota
	frontendInstance
	replicaInstance
)

func newIMCounts() imCounts {
	return imCounts{byNode: map[string]*instanceCount{}, at: map[string][]countAt{}, dirty: map[string]struct{}{}}
}

// markVolume records that the volume changed: for the I/O checker and the
// IM counts alike.
func (s *Sim) markVolume(name string) {
	s.io.mark(name)
	s.counts.dirty[name] = struct{}{}
}

// instances counts what the node's serving IM runs (see instanceNames):
// engines (targets, and the new engines of switch-overs to the node),
// engine frontends and active replicas of attached v2 volumes.
func (s *Sim) instances(n *node) (engines, frontends, replicas int) {
	s.refreshCounts()
	c := s.counts.byNode[n.name]
	if c == nil {
		return 0, 0, 0
	}
	return c.engines, c.frontends, c.replicas
}

// refreshCounts moves each changed volume's instances from where they were
// counted to where they are now.
func (s *Sim) refreshCounts() {
	c := &s.counts
	for name := range c.dirty {
		for _, a := range c.at[name] {
			c.add(a, -1)
		}
		at := c.at[name][:0]
		if v := s.vols[name]; v != nil {
			at = s.instancesOf(v, at)
		}
		for _, a := range at {
			c.add(a, 1)
		}
		if len(at) == 0 {
			delete(c.at, name)
		} else {
			c.at[name] = at
		}
	}
	clear(c.dirty)
}

func (c *imCounts) add(a countAt, d int) {
	n := c.byNode[a.node]
	if n == nil {
		n = &instanceCount{}
		c.byNode[a.node] = n
	}
	switch a.kind {
	case engineInstance:
		n.engines += d
	case frontendInstance:
		n.frontends += d
	case replicaInstance:
		n.replicas += d
	}
	if *n == (instanceCount{}) {
		delete(c.byNode, a.node)
	}
}

// instancesOf appends where v has an instance a node's serving IM runs,
// by the rules instanceNames lists them with.
func (s *Sim) instancesOf(v *volume, out []countAt) []countAt {
	if n := s.nodes[v.target]; n != nil && indexed(s.targetsOn, v.target, v.name) && runsEngine(n, v) {
		out = append(out, countAt{v.target, engineInstance})
	}
	if v.sw != nil {
		if indexed(s.migratingTo, v.sw.dest, v.name) {
			out = append(out, countAt{v.sw.dest, engineInstance})
		}
	}
	if n := s.nodes[v.attached]; n != nil && indexed(s.attachedOn, v.attached, v.name) && s.runsFrontend(n, v) {
		out = append(out, countAt{v.attached, frontendInstance})
	}
	for _, r := range v.replicas {
		if v.replicaOn(r.node) != r {
			continue // a node's second entry counts as its first
		}
		if n := s.nodes[r.node]; n != nil && indexed(s.replicasOn, r.node, v.name) && instanceReplica(n, v) != nil {
			out = append(out, countAt{r.node, replicaInstance})
		}
	}
	return out
}

// indexed reports whether idx lists vol under key.
func indexed(idx map[string]map[string]struct{}, key, vol string) bool {
	_, ok := idx[key][vol]
	return ok
}
