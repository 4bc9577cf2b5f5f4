package nodeworker

import (
	"context"
	"time"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/hostkernel"
	"github.com/switchback-dev/switchback/internal/periodic"
)

// hostReadInterval is how often the worker reads its host's kernel again:
// nvme_core may be loaded after the worker started (Longhorn loads
// nvme-tcp), and its multipath parameter changes only when it is loaded.
const hostReadInterval = 5 * time.Minute

// reportHost reads the node's nvme_core.multipath from Config.Sysfs and
// records it through the data plane's HostReporter, now and then every
// hostReadInterval until ctx ends, so that the steps, the controller and
// `switchback plan` see whether a switch-over of a volume attached here
// would keep its path. It does nothing where no sysfs is configured or the
// data plane has no hosts (the simulator models the reading itself).
func (w *Worker) reportHost(ctx context.Context) {
	rep, ok := w.cfg.DataPlane.(dataplane.HostReporter)
	if w.cfg.Sysfs == "" || !ok {
		return
	}
	last, reported := dataplane.MultipathUnknown, false
	read := func() {
		m, err := hostkernel.NVMeMultipath(w.cfg.Sysfs)
		if reported && m == last {
			return
		}
		if err != nil {
			w.log.Warn("cannot read nvme_core.multipath; volumes attached here are switched over as if it were on", "error", err)
		}
		if err := rep.ReportNVMeMultipath(ctx, w.cfg.Node, m); err != nil {
			if ctx.Err() == nil {
				w.log.Warn("report nvme_core.multipath", "multipath", m.Show(), "error", err)
			}
			return
		}
		if m == dataplane.MultipathOff {
			w.log.Warn("nvme_core.multipath is N: no volume attached to this node has its target switched over until it is Y")
		}
		last, reported = m, true
	}
	read()
	go periodic.Every(ctx, hostReadInterval, read)
}
