package plan

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/dataplane"
)

// fakeReader answers from a Cluster and fails the call named in failOn.
type fakeReader struct {
	c      Cluster
	failOn string
	imNode *string
}

var errBoom = errors.New("boom")

func (f fakeReader) err(call string) error {
	if f.failOn == call {
		return errBoom
	}
	return nil
}

func (f fakeReader) Platform(context.Context) (dataplane.Platform, error) {
	return f.c.Platform, f.err("platform")
}

func (f fakeReader) Nodes(context.Context) ([]dataplane.Node, error) {
	return f.c.Nodes, f.err("nodes")
}

func (f fakeReader) Node(_ context.Context, name string) (dataplane.Node, error) {
	if n, ok := f.c.Node(name); ok {
		return n, nil
	}
	return dataplane.Node{}, dataplane.ErrNotFound
}

func (f fakeReader) DefaultInstanceManagerImage(context.Context) (string, error) {
	return f.c.DefaultImage, f.err("image")
}

func (f fakeReader) InstanceManagers(_ context.Context, node string) ([]dataplane.InstanceManager, error) {
	if f.imNode != nil {
		*f.imNode = node
	}
	return f.c.InstanceManagers, f.err("ims")
}

func (f fakeReader) Volumes(context.Context) ([]dataplane.Volume, error) {
	return f.c.Volumes, f.err("volumes")
}

func (f fakeReader) Volume(context.Context, string) (dataplane.Volume, error) {
	return dataplane.Volume{}, dataplane.ErrNotFound
}

func (f fakeReader) VolumesOn(context.Context, string) ([]dataplane.Volume, error) {
	return nil, f.err("volumes")
}

func (f fakeReader) TargetCounts(context.Context) (map[string]int, error) {
	return dataplane.CountTargets(f.c.Volumes), f.err("targets")
}

func (f fakeReader) LonghornUpgrader(context.Context) (dataplane.LonghornUpgrader, error) {
	return f.c.Upgrader, f.err("upgrader")
}

func (f fakeReader) RebuildSettings(context.Context) (dataplane.RebuildSettings, error) {
	if f.c.Rebuild == nil {
		return dataplane.RebuildSettings{}, f.err("rebuild")
	}
	return *f.c.Rebuild, f.err("rebuild")
}

func (f fakeReader) Disks(context.Context) (map[string][]dataplane.Disk, error) {
	out := map[string][]dataplane.Disk{}
	for _, n := range f.c.Nodes {
		if len(n.Disks) > 0 {
			out[n.Name] = n.Disks
		}
	}
	return out, f.err("disks")
}

func (f fakeReader) Workloads(_ context.Context, node string) (dataplane.Workloads, error) {
	return dataplane.Workloads{Node: node}, f.err("workloads")
}

func (f fakeReader) Snapshots(context.Context, string) ([]dataplane.Snapshot, error) {
	return nil, f.err("snapshots")
}

func TestRead(t *testing.T) {
	want := cluster3(attached("a", "node-1", "node-1", "node-2"))
	want.Upgrader = dataplane.LonghornUpgrader{Settings: map[string]string{dataplane.SettingV2IMAutoUpgrade: "false"}}
	want.Rebuild = &dataplane.RebuildSettings{ReplenishWait: 10 * time.Minute}
	asked := "unset"
	got, err := Read(context.Background(), fakeReader{c: want, imNode: &asked})
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.Empty(t, asked, "Read lists the IMs of every node")
}

func TestReadPlacement(t *testing.T) {
	full := cluster3(attached("a", "node-1", "node-1", "node-2"), attached("b", "node-1", "node-2", "node-3"))
	got, err := ReadPlacement(context.Background(), fakeReader{c: full})
	require.NoError(t, err)
	assert.Equal(t, Cluster{Platform: full.Platform, Nodes: full.Nodes, InstanceManagers: full.InstanceManagers, TargetCounts: map[string]int{"node-1": 2}}, got,
		"platform, nodes, IMs and counts; no volumes")

	_, err = ReadPlacement(context.Background(), fakeReader{c: full, failOn: "targets"})
	require.ErrorIs(t, err, errBoom)
	assert.EqualError(t, err, "plan: read target counts: boom")
}

func TestReadWrapsErrors(t *testing.T) {
	for call, msg := range map[string]string{
		"platform": "plan: read platform: boom",
		"nodes":    "plan: read nodes: boom",
		"ims":      "plan: read instance managers: boom",
		"volumes":  "plan: read volumes: boom",
		"image":    "plan: read default instance-manager image: boom",
		"upgrader": "plan: read Longhorn's own upgrader: boom",
		"rebuild":  "plan: read Longhorn's rebuild settings: boom",
		"disks":    "plan: read disks: boom",
	} {
		t.Run(call, func(t *testing.T) {
			_, err := Read(context.Background(), fakeReader{c: cluster3(), failOn: call})
			require.ErrorIs(t, err, errBoom)
			assert.EqualError(t, err, msg)
		})
	}
}
