package plan

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/test/harness/dataplanetest"
)

func TestHolds(t *testing.T) {
	v112 := dataplane.ProfileV112
	node := dataplanetest.V2Node("n1")
	cordoned := node
	cordoned.Cordoned = true
	behind := node
	behind.ManagerIMImage = oldIM
	noManager := node
	noManager.ManagerIMImage = ""
	im := dataplanetest.RunningIM("n1", oldIM)
	sharded := im
	sharded.Shards = 2
	tests := []struct {
		name         string
		profile      dataplane.Profile
		node         dataplane.Node
		ims          []dataplane.InstanceManager
		defaultImage string
		want         []string
	}{
		{"nothing holds", v112, node, []dataplane.InstanceManager{im}, newIM, nil},
		{"default image not read: not a hold", v112, node, []dataplane.InstanceManager{im}, "", nil},
		{"cordoned", v112, cordoned, []dataplane.InstanceManager{im}, newIM, []string{HoldNodeCordoned}},
		{"default image changed", v112, node, []dataplane.InstanceManager{im}, "im:v3", []string{HoldDefaultImageChanged}},
		{"manager behind", v112, behind, []dataplane.InstanceManager{im}, newIM, []string{HoldManagerNotRolledOut}},
		{"no manager pod", v112, noManager, []dataplane.InstanceManager{im}, newIM, []string{HoldManagerNotRolledOut}},
		{"shards on the old IM", v112, node, []dataplane.InstanceManager{sharded}, newIM, []string{HoldShardsOnNode}},
		{"every hold, in order", v112, func() dataplane.Node { n := behind; n.Cordoned = true; return n }(), []dataplane.InstanceManager{sharded}, "im:v3",
			[]string{HoldNodeCordoned, HoldDefaultImageChanged, HoldManagerNotRolledOut, HoldShardsOnNode}},
		{"in place: Longhorn's default image and manager do not count", dataplane.ProfileInPlace, behind, []dataplane.InstanceManager{im}, "im:v3", nil},
		{"in place: cordon and shards still do", dataplane.ProfileInPlace, cordoned, []dataplane.InstanceManager{sharded}, newIM, []string{HoldNodeCordoned, HoldShardsOnNode}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, h := range Holds(tt.profile, tt.node, tt.ims, tt.defaultImage, newIM) {
				assert.Contains(t, h.Message, "n1")
				got = append(got, h.Reason)
			}
			assert.Equal(t, tt.want, got)
		})
	}
}
