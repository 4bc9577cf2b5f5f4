// Package hostkernel reads what the node steps need to know of the kernel
// of the node a worker runs on, from sysfs. Module parameters are not
// namespaced, so the read-only /sys a container gets shows the host's.
package hostkernel

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/switchback-dev/switchback/dataplane"
)

// DefaultSysfs is where sysfs is mounted in the worker's container.
const DefaultSysfs = "/sys"

// multipathParam is nvme_core's multipath parameter under sysfs; the kernel
// exposes it read-only (0444), so it changes only with the module loaded
// again, in practice a reboot.
const multipathParam = "module/nvme_core/parameters/multipath"

// NVMeMultipath reads nvme_core.multipath under the sysfs mounted at root:
// Y or N as the parameter says; N as well when nvme_core is loaded without
// the parameter (a kernel built without CONFIG_NVME_MULTIPATH). It is
// unknown, with the reason as the error, when nvme_core is not loaded (it
// may be once Longhorn loads nvme-tcp) or sysfs cannot be read.
func NVMeMultipath(root string) (dataplane.Multipath, error) {
	b, err := os.ReadFile(filepath.Join(root, multipathParam))
	switch {
	case err == nil:
		v := strings.TrimSpace(string(b))
		if m := dataplane.ParseMultipath(v); m != dataplane.MultipathUnknown {
			return m, nil
		}
		return dataplane.MultipathUnknown, fmt.Errorf("%s reads %q, neither Y nor N", filepath.Join(root, multipathParam), v)
	case !errors.Is(err, fs.ErrNotExist):
		return dataplane.MultipathUnknown, fmt.Errorf("read nvme_core.multipath: %w", err)
	}
	if _, err := os.Stat(filepath.Join(root, "module/nvme_core")); err == nil {
		return dataplane.MultipathOff, nil
	}
	if _, err := os.Stat(filepath.Join(root, "module")); err != nil {
		return dataplane.MultipathUnknown, fmt.Errorf("sysfs is not readable at %s: %w", root, err)
	}
	return dataplane.MultipathUnknown, fmt.Errorf("the nvme_core module is not loaded (%s has no nvme_core)", filepath.Join(root, "module"))
}
