package natsauth_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/natsauth"
	"github.com/switchback-dev/switchback/topology"
)

// A worker may subscribe to what wakes its waiting steps (its own node's
// events, and a simulated cluster's change notices when it drives one) and
// to nothing of the kind beyond: another node's events stay refused, and
// the notices too unless the workers are given the simulated cluster.
func TestWorkerSubscribesToWhatWakesIt(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sim     bool
		subject string
		allowed bool
	}{
		{"its node's events", false, events.NodeAggregate(testRef, "n1").Subject(), true},
		{"another node's events", false, events.NodeAggregate(testRef, "n2").Subject(), false},
		{"a simulated cluster's change notices", true, topology.SimChanged, true},
		{"change notices without a simulated cluster", false, topology.SimChanged, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := natsauth.Config{Nodes: []string{"n1", "n2"}}
			if tc.sim {
				cfg.WorkerExtraPublish = []string{topology.SimSubjects}
			}
			d := newDeployment(t, cfg)
			w := d.connectWorker("n1")
			sub, err := w.nc.SubscribeSync(tc.subject)
			require.NoError(t, err)
			require.NoError(t, w.nc.Flush())
			if !tc.allowed {
				denied(t, w.viol, tc.subject, func(ctx context.Context) error {
					_, err := sub.NextMsgWithContext(ctx)
					return err
				})
				return
			}
			// The controller publishes on the subject (core NATS: the event
			// stream may capture it, which does not matter here).
			require.NoError(t, d.nc.Publish(tc.subject, []byte("{}")))
			_, err = sub.NextMsg(10 * time.Second)
			require.NoError(t, err, "the worker receives what it subscribed to")
			require.NoError(t, w.viol.Find(tc.subject), "no violation")
		})
	}
}
