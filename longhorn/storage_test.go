package longhorn

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/switchback-dev/switchback/dataplane"
)

// A node's disks map from spec.disks and status.diskStatus, decoded from
// the JSON Longhorn serves, sorted by name, with the storage settings on
// each: a disk is schedulable only with its spec allowing it, no eviction
// and its Schedulable condition true, and one without a status reports no
// storage.
func TestToDisks(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "longhorn.io/v1beta2", "kind": "Node", "metadata": map[string]any{"name": "n1"},
		"spec": map[string]any{"name": "n1", "allowScheduling": true, "tags": []any{"fast"}, "disks": map[string]any{
			"nvme1": map[string]any{"diskType": "block", "path": "/dev/nvme1n1", "allowScheduling": true, "evictionRequested": true, "storageReserved": int64(0), "tags": []any{}},
			"nvme0": map[string]any{"diskType": "block", "path": "/dev/nvme0n1", "allowScheduling": true, "evictionRequested": false, "storageReserved": int64(1 << 30), "tags": []any{"ssd"}},
			"fs":    map[string]any{"diskType": "filesystem", "path": "/var/lib/longhorn", "allowScheduling": true, "evictionRequested": false, "storageReserved": int64(0)},
			"new":   map[string]any{"diskType": "block", "path": "/dev/nvme2n1", "allowScheduling": true},
		}},
		"status": map[string]any{"zone": "z1", "conditions": []any{}, "diskStatus": map[string]any{
			"nvme0": map[string]any{"storageMaximum": int64(100 << 30), "storageAvailable": int64(80 << 30), "storageScheduled": int64(40 << 30), "diskUUID": "u0",
				"conditions": []any{map[string]any{"type": "Schedulable", "status": "True"}}},
			"nvme1": map[string]any{"storageMaximum": int64(100 << 30), "storageAvailable": int64(100 << 30), "storageScheduled": int64(0), "diskUUID": "u1",
				"conditions": []any{map[string]any{"type": "Schedulable", "status": "True"}}},
			"fs": map[string]any{"storageMaximum": int64(50 << 30), "storageAvailable": int64(50 << 30), "storageScheduled": int64(0), "diskUUID": "u2",
				"conditions": []any{map[string]any{"type": "Schedulable", "status": "False"}}},
		}},
	}}
	var ln LonghornNode
	require.NoError(t, FromUnstructured(u, &ln))
	assert.Equal(t, []dataplane.Disk{
		{Name: "fs", StorageMaximum: 50 << 30, StorageAvailable: 50 << 30, OverProvisioningPercentage: 200, MinimalAvailablePercentage: 10},
		{Name: "new", Block: true, OverProvisioningPercentage: 200, MinimalAvailablePercentage: 10},
		{Name: "nvme0", Block: true, Schedulable: true, Tags: []string{"ssd"}, StorageMaximum: 100 << 30, StorageAvailable: 80 << 30,
			StorageReserved: 1 << 30, StorageScheduled: 40 << 30, OverProvisioningPercentage: 200, MinimalAvailablePercentage: 10},
		{Name: "nvme1", Block: true, Tags: []string{}, StorageMaximum: 100 << 30, StorageAvailable: 100 << 30, OverProvisioningPercentage: 200, MinimalAvailablePercentage: 10},
	}, toDisks(&ln, 200, 10))
	n := toNode(&ln, nil, true, nil)
	assert.Equal(t, "z1", n.Zone)
	assert.Equal(t, []string{"fast"}, n.Tags)
}

// A volume's size, selectors and anti-affinity: spec.size is served as a
// string, and a volume's enabled or disabled overrides the setting.
func TestToVolumeScheduling(t *testing.T) {
	for _, tc := range []struct {
		name              string
		soft, zone        string
		settings          rebuildSettings
		wantSoft, wantHrd bool
	}{
		{name: "Longhorn's defaults", settings: rebuildSettings{zoneSoftAntiAffinity: true}},
		{name: "settings flipped", settings: rebuildSettings{softAntiAffinity: true}, wantSoft: true, wantHrd: true},
		{name: "the volume overrides", soft: "enabled", zone: "disabled", settings: rebuildSettings{zoneSoftAntiAffinity: true}, wantSoft: true, wantHrd: true},
		{name: "ignored follows the settings", soft: "ignored", zone: "ignored", settings: rebuildSettings{softAntiAffinity: true, zoneSoftAntiAffinity: true}, wantSoft: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := &Volume{ObjectMeta: metav1.ObjectMeta{Name: "vol"}, Spec: VolumeSpec{DataEngine: "v2", Size: "21474836480",
				NodeSelector: []string{"fast"}, DiskSelector: []string{"ssd"}, ReplicaSoftAntiAffinity: tc.soft, ReplicaZoneSoftAntiAffinity: tc.zone}}
			got := toVolume(v, nil, nil, nil, nil, tc.settings)
			assert.Equal(t, int64(20<<30), got.Size)
			assert.Equal(t, []string{"fast"}, got.NodeSelector)
			assert.Equal(t, []string{"ssd"}, got.DiskSelector)
			assert.Equal(t, tc.wantSoft, got.SoftAntiAffinity)
			assert.Equal(t, tc.wantHrd, got.HardZoneAntiAffinity)
		})
	}
	assert.Zero(t, toVolume(&Volume{Spec: VolumeSpec{Size: "big"}}, nil, nil, nil, nil, defaultRebuild).Size, "not a number")
}
