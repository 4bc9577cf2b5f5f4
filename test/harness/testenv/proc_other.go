//go:build !linux

package testenv

import (
	"os"
	"os/exec"
	"syscall"
)

// setProcAttrs does nothing outside Linux: there is no portable way to have
// children die with their parent, so only the orderly Stop and the signal
// handler of Main clean up there. CI and the project's machines run Linux.
func setProcAttrs(cmd *exec.Cmd) {}

// signalGroup signals the child itself; process groups are Linux-only here.
func signalGroup(p *os.Process, sig syscall.Signal) error {
	if sig == syscall.SIGKILL {
		return p.Kill()
	}
	return p.Signal(sig)
}
