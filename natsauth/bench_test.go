package natsauth_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/natsauth"
)

// BenchmarkWorkerAppendThroughImport: a worker's append of one event
// through its node account's import (natsauth.Config.NodeAccounts) against
// the same append by a worker in the streams' account, alternately on one
// server under the generated authorization. ratio is same-account time
// over import time (1 = the import costs nothing).
func BenchmarkWorkerAppendThroughImport(b *testing.B) {
	nodes := []string{"n1", "n2"}
	imported := newDeployment(b, natsauth.Config{Nodes: nodes, Account: natsauth.DefaultAccount, NodeAccounts: true})
	shared := newDeployment(b, natsauth.Config{Nodes: nodes, Account: natsauth.DefaultAccount})
	wi, ws := imported.connectWorker("n1"), shared.connectWorker("n1")
	agg := events.NodeAggregate(testRef, "n1")
	payload := events.VolumeStateChanged{Volume: "pvc-0123456789abcdef", From: events.VolumeSwitchingOver, To: events.VolumeSwitchedOver, TargetNode: "n2", Message: "target moved"}
	var throughImport, sameAccount time.Duration
	var vi, vs uint64
	var err error
	for i := 0; b.Loop(); i++ {
		env := events.New(agg, events.SourceWorker, fmt.Sprintf("cmd-%d", i), time.Now(), payload)
		start := time.Now()
		if vi, err = wi.store.Append(imported.ctx, agg, vi, env...); err != nil {
			b.Fatal(err)
		}
		throughImport += time.Since(start)
		start = time.Now()
		if vs, err = ws.store.Append(shared.ctx, agg, vs, env...); err != nil {
			b.Fatal(err)
		}
		sameAccount += time.Since(start)
	}
	b.ReportMetric(float64(throughImport.Nanoseconds())/float64(b.N), "import-ns/op")
	b.ReportMetric(float64(sameAccount.Nanoseconds())/float64(b.N), "same-account-ns/op")
	b.ReportMetric(float64(sameAccount)/float64(throughImport), "ratio")
}
