package intake_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/commands"
	"github.com/switchback-dev/switchback/commands/intake"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/internal/enginetest"
	"github.com/switchback-dev/switchback/kubeclient"
	"github.com/switchback-dev/switchback/sim"
)

// A manager that exists when the intake starts is requested as soon as the
// informer has listed it, not at the next poll of a sync wait (client-go's
// WaitForCacheSync looks every 100 ms): the first upgrade after a controller
// restart waited for it (perf's BenchmarkControllerResume). The in-memory
// API lists at once, so the request follows within a few milliseconds; the
// best of three keeps a loaded machine from failing it.
func TestRequestDoesNotWaitForASyncPoll(t *testing.T) {
	e := enginetest.Start(t, sim.New(sim.Config{}), enginetest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store := e.Store
	load := commands.New(commands.Config{Store: store}).Managers

	best := time.Hour
	for i := range 3 {
		m := &v1beta2.DataEngineUpgradeManager{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("at-start-%d", i), Namespace: "ns", UID: types.UID(fmt.Sprintf("uid-%d", i))},
			Spec:       v1beta2.DataEngineUpgradeManagerSpec{DataEngine: v1beta2.DataEngineTypeV2},
		}
		ref := events.ManagerRef{Namespace: "ns", Name: m.Name, UID: string(m.UID)}
		kc := kubeclient.NewFake()
		_, err := kc.Managers("ns").Create(ctx, m)
		require.NoError(t, err)
		c, err := intake.New(intake.Config{Client: kc, Store: store, Namespace: "ns"})
		require.NoError(t, err)
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		started := time.Now()
		go func() { done <- c.Run(runCtx) }()
		require.Eventually(t, func() bool {
			l, err := load.Load(ctx, events.ManagerAggregate(ref))
			return err == nil && l.State.Exists
		}, 10*time.Second, time.Millisecond, "upgrade of %s requested", ref)
		best = min(best, time.Since(started))
		stop()
		<-done
	}
	require.Less(t, best, 60*time.Millisecond, "the best of three starts took until the request")
}
