package sim

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/dataplane"
)

// countInstances counts what the node's serving IM runs over every volume
// listed on the node, as Sim.instances did before its counts were kept: the
// reference the kept counts are held to.
func countInstances(s *Sim, n *node) (engines, frontends, replicas int) {
	for name := range s.targetsOn[n.name] {
		if runsEngine(n, s.vols[name]) {
			engines++
		}
	}
	engines += len(s.migratingTo[n.name])
	for name := range s.attachedOn[n.name] {
		if s.runsFrontend(n, s.vols[name]) {
			frontends++
		}
	}
	for name := range s.replicasOn[n.name] {
		if instanceReplica(n, s.vols[name]) != nil {
			replicas++
		}
	}
	return engines, frontends, replicas
}

// TestInstanceCountsMatchAFullCount: on random clusters, through random
// actions, faults, heals and time (both profiles), the counts the simulator
// keeps of what each IM runs equal a count over every volume after each
// step; a change that moved an instance without marking its volume fails
// here.
func TestInstanceCountsMatchAFullCount(t *testing.T) {
	for seed := range int64(40) {
		profile := dataplane.ProfileV112
		if seed%2 == 1 {
			profile = dataplane.ProfileInPlace
		}
		s := Random(seed, RandomOptions{Faults: seed%3 == 0, Config: Config{Profile: profile, Clock: NewFakeClock(DefaultStart)}})
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		pick := func(names []string) string {
			if len(names) == 0 {
				return "none"
			}
			return names[rng.IntN(len(names))]
		}
		check := func(step int, what string) {
			s.mu.Lock()
			defer s.mu.Unlock()
			for _, name := range s.nodeNames {
				n := s.nodes[name]
				e, f, r := countInstances(s, n)
				ke, kf, kr := s.instances(n)
				require.Equal(t, [3]int{e, f, r}, [3]int{ke, kf, kr}, "seed %d step %d (%s): node %s: engines, frontends, replicas", seed, step, what, name)
			}
		}
		check(0, "built")
		for step := 1; step <= 120; step++ {
			vols, err := s.Volumes(ctx)
			require.NoError(t, err)
			ims, err := s.InstanceManagers(ctx, "")
			require.NoError(t, err)
			var volNames, imNames []string
			for _, v := range vols {
				volNames = append(volNames, v.Name)
			}
			for _, im := range ims {
				imNames = append(imNames, im.Name)
			}
			s.mu.Lock()
			nodeNames := append([]string(nil), s.nodeNames...)
			for name := range s.deleted {
				nodeNames = append(nodeNames, name)
			}
			s.mu.Unlock()
			vol, node, im := pick(volNames), pick(nodeNames), pick(imNames)
			var what string
			// Errors are the simulator refusing what the cluster would:
			// the counts must hold either way.
			switch rng.IntN(12) {
			case 0:
				what, _ = "set engine node", s.SetEngineNode(ctx, vol, node)
			case 1:
				what, _ = "clear engine node", s.SetEngineNode(ctx, vol, "")
			case 2:
				what, _ = "delete IM", s.DeleteInstanceManager(ctx, im)
			case 3:
				what, _ = "cut IM", s.CutInstanceManager(im)
			case 4:
				what, _ = "detach", s.DetachVolume(vol)
			case 5:
				what, _ = "attach", s.AttachVolume(vol, node)
			case 6:
				what = "fail or delete a replica"
				if v, err := s.Volume(ctx, vol); err == nil && len(v.Replicas) > 0 {
					r := v.Replicas[rng.IntN(len(v.Replicas))].Name
					if rng.IntN(2) == 0 {
						_ = s.FailReplica(ctx, vol, r)
					} else {
						_ = s.DeleteReplica(ctx, vol, r)
					}
				}
			case 7:
				what, _ = "node not ready", s.InjectNodeNotReady(node)
			case 8:
				what, _ = "node deleted", s.InjectNodeDeleted(node)
			case 9:
				what, _ = "IM start failure", s.InjectIMStartFailure(node)
			case 10:
				what = "heal all"
				s.HealAll()
			default:
				what = "time passes"
				s.Advance(time.Duration(rng.IntN(3000)) * time.Millisecond)
			}
			check(step, what)
		}
	}
}
