package nodeworker

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/sim"
)

// reportingHosts is a data plane with hosts: the simulated node takes the
// worker's report as its reading.
type reportingHosts struct {
	*sim.Sim
	reports int
}

func (p *reportingHosts) ReportNVMeMultipath(_ context.Context, node string, m dataplane.Multipath) error {
	p.reports++
	return p.SetMultipath(node, m)
}

// sysfsWith is a sysfs whose nvme_core.multipath reads value.
func sysfsWith(t *testing.T, value string) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "module/nvme_core/parameters")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "multipath"), []byte(value+"\n"), 0o444))
	return root
}

func TestWorkerReportsItsHostsMultipath(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sysfs   func(t *testing.T) string
		want    dataplane.Multipath
		reports int
	}{
		{name: "off", sysfs: func(t *testing.T) string { return sysfsWith(t, "N") }, want: dataplane.MultipathOff, reports: 1},
		{name: "on", sysfs: func(t *testing.T) string { return sysfsWith(t, "Y") }, want: dataplane.MultipathOn, reports: 1},
		{name: "unreadable: reported unknown", sysfs: func(t *testing.T) string { return t.TempDir() }, want: dataplane.MultipathUnknown, reports: 1},
		{name: "no sysfs configured: nothing read", sysfs: func(*testing.T) string { return "" }, want: dataplane.MultipathOn},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := sim.New(sim.Config{})
			require.NoError(t, s.AddNode("n1"))
			plane := &reportingHosts{Sim: s}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			w := &Worker{cfg: Config{Node: "n1", DataPlane: plane, Sysfs: tc.sysfs(t)}, log: slog.New(slog.DiscardHandler)}
			w.reportHost(ctx)
			n, err := s.Node(ctx, "n1")
			require.NoError(t, err)
			assert.Equal(t, tc.want, n.NVMeMultipath)
			assert.Equal(t, tc.reports, plane.reports)
		})
	}
}
