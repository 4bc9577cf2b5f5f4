//go:build linux

package testenv

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// setProcAttrs puts the child in its own process group, so that stopping it
// reaches anything it spawned, and asks the kernel to SIGKILL it when the
// test process dies. The latter is what keeps a panicking test, a `go test
// -timeout` or a kill -9 of the test binary from leaving servers behind: no
// Go code runs in those cases.
//
// Pdeathsig fires when the *thread* that forked the child exits. The Go
// runtime only ends threads of goroutines that exit while locked with
// runtime.LockOSThread, which this package never does, so in practice it
// fires when the process exits.
func setProcAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// signalGroup sends sig to the child's whole process group.
func signalGroup(p *os.Process, sig syscall.Signal) error {
	// With Setpgid the group id is the child's pid; a negative pid addresses
	// the group.
	err := syscall.Kill(-p.Pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}
