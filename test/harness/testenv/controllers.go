package testenv

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// The binaries of the control plane beside the apiserver, started by
// StartControllers.
const (
	// ControllerManagerBin is the kube-controller-manager binary.
	ControllerManagerBin = "kube-controller-manager"
	// SchedulerBin is the kube-scheduler binary.
	SchedulerBin = "kube-scheduler"
)

// Controllers are the kube-controller-manager controllers StartControllers
// runs: the disruption controller, the only writer of a
// PodDisruptionBudget's status, which the eviction API checks; the
// workload controllers that recreate an evicted pod; and the garbage
// collector. The node lifecycle controller is left out on purpose: with no
// kubelet heartbeats it would mark every node unreachable and evict
// everything on it (the kubelets package plays the part of it a test
// needs).
var Controllers = []string{
	"disruption-controller",
	"garbage-collector-controller",
	"replicaset-controller",
	"deployment-controller",
	"statefulset-controller",
}

// StartControllers starts kube-controller-manager (Controllers) and
// kube-scheduler against the apiserver, as the admin, without leader
// election or a serving port. They stop with the environment, before the
// apiserver. They report no readiness of their own: a test waits on what
// they do (a budget's status, a pod bound), and Exited tells it when one of
// them died meanwhile.
func (e *Env) StartControllers() error {
	for _, b := range []string{ControllerManagerBin, SchedulerBin} {
		if e.running(b) {
			return fmt.Errorf("testenv: %s is running", b)
		}
	}
	if _, err := e.spawn(ControllerManagerBin, filepath.Join(e.BinDir, ControllerManagerBin), e.apiEnv,
		"--kubeconfig="+e.Kubeconfig,
		"--controllers="+strings.Join(Controllers, ","),
		"--leader-elect=false",
		"--secure-port=0",
		"--v=2",
	); err != nil {
		return err
	}
	_, err := e.spawn(SchedulerBin, filepath.Join(e.BinDir, SchedulerBin), e.apiEnv,
		"--kubeconfig="+e.Kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
		"--v=2",
	)
	return err
}

// Exited returns, for every server of the environment that has exited, its
// exit and the tail of its log; nil while all run.
func (e *Env) Exited() error {
	var errs []error
	for _, p := range e.procs {
		select {
		case <-p.done:
			errs = append(errs, fmt.Errorf("%s exited (%v); log tail:\n%s", p.name, p.waitErr, tailFile(p.logPath, 30)))
		default:
		}
	}
	return errors.Join(errs...)
}

func (e *Env) running(name string) bool {
	for _, p := range e.procs {
		if p.name != name {
			continue
		}
		select {
		case <-p.done:
		default:
			return true
		}
	}
	return false
}
