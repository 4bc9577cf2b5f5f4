package enginetest

import (
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/events"
)

// Timed is an upgrade about to be measured: its end is watched on the
// manager's subject rather than by polling its state, as a poll would add
// its own load to what is measured.
type Timed struct {
	e     *Engine
	m     events.ManagerRef
	sub   *nats.Subscription
	ended chan struct{}
	start time.Time
	cpu   time.Duration
}

// Time subscribes to m's end; Start then requests m and Wait waits for its
// end.
func (e *Engine) Time(m events.ManagerRef) *Timed {
	e.t.Helper()
	u := &Timed{e: e, m: m, ended: make(chan struct{}, 1)}
	sub, err := e.NC.Subscribe(events.ManagerAggregate(m).Subject(), func(msg *nats.Msg) {
		switch events.Type(msg.Header.Get(events.HeaderPrefix + "type")) {
		case events.TypeUpgradeCompleted, events.TypeUpgradeFailed, events.TypeUpgradeCancelled:
			select {
			case u.ended <- struct{}{}:
			default:
			}
		}
	})
	if err != nil {
		e.t.Fatalf("subscribe to %s: %v", m, err)
	}
	if err := e.NC.Flush(); err != nil {
		e.t.Fatalf("subscribe to %s: %v", m, err)
	}
	u.sub = sub
	return u
}

// Start starts the clocks and requests the upgrade of every node.
func (u *Timed) Start() {
	u.e.t.Helper()
	u.start, u.cpu = time.Now(), ProcessCPU()
	u.e.Request(u.m)
}

// Wait waits at most timeout for the upgrade to end and returns the wall
// and process CPU time since Start; it fails the test unless the upgrade
// completed.
func (u *Timed) Wait(timeout time.Duration) (elapsed, cpu time.Duration) {
	u.e.t.Helper()
	defer func() { _ = u.sub.Unsubscribe() }()
	select {
	case <-u.ended:
	case <-time.After(timeout):
		u.e.t.Fatalf("upgrade %s did not end within %s", u.m, timeout)
	}
	elapsed, cpu = time.Since(u.start), ProcessCPU()-u.cpu
	// The subscription may see the event before the stream stored it.
	st := u.e.WaitManager(u.m, time.Minute, "a terminal state", func(s manager.State) bool { return s.Terminal() })
	if st.State != events.ManagerCompleted {
		u.e.t.Fatalf("upgrade %s ended %s: %s", u.m, st.State, st.Message)
	}
	return elapsed, cpu
}

// ProcessCPU is the CPU time this process used so far (user + system): the
// orchestrator, the workers, the simulator and the NATS server all run in
// it. Unlike wall time it hardly moves when other processes load the
// machine.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
