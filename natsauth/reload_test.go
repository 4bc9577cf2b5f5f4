package natsauth_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/natsauth"
	"github.com/switchback-dev/switchback/natsembed/natstest"
)

// TestAddingANodeAccountTakesTwoReloads plays what adding a node to the
// node-account layout costs on servers that read their configuration from
// files, as the deployed ones do: the authorization regenerated with the new
// node (keeping every credential) and the servers reloaded, as `nats-server
// --signal reload` does. After one reload the running worker of n1 is still
// served, and the new node's worker logs in to its new account, but none of
// that account's service imports answers (no responders): nats-server
// 2.15.2 subscribes the service imports of an account that a reload creates
// only on the next reload. After a second reload of the same files the new
// worker, and a connection it opened between the reloads, binds, appends and
// pulls its commands, and n1's worker was refused nothing meanwhile. Should a server release fix this, the first
// assertion on the new worker fails and docs/security.md §12 can drop the
// second reload.
func TestAddingANodeAccountTakesTwoReloads(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("R%d", n), func(t *testing.T) { addNodeByReload(t, n) })
	}
}

func addNodeByReload(t *testing.T, servers int) {
	gen := func(existing map[string]natsauth.Credential, nodes ...string) *natsauth.Authorization {
		auth, err := natsauth.Generate(natsauth.Config{Nodes: nodes, Account: natsauth.DefaultAccount, NodeAccounts: true, Existing: existing})
		require.NoError(t, err)
		return auth
	}
	before := gen(nil, "n1")
	files := natstest.StartFromFiles(t, servers, before.ServerConfig())
	d := setUp(t, before, files.Servers[0], files.Connect, servers)
	ctx := d.ctx
	w1 := d.connectWorker("n1")
	appendResumed := func(w *worker, id string) error {
		agg := events.NodeAggregate(testRef, w.node)
		h, err := w.store.Load(ctx, agg)
		if err != nil {
			return err
		}
		_, err = w.store.Append(ctx, agg, h.Version, events.New(agg, events.SourceWorker, id, time.Now(), events.NodeResumed{Step: events.NodePending, Message: id})...)
		return err
	}
	require.NoError(t, appendResumed(w1, "before"))

	n1, _ := before.Worker("n1")
	after := gen(map[string]natsauth.Credential{"": before.Controller.Credential, natsauth.ReaderKey: before.Reader.Credential, "n1": n1.Credential}, "n1", "n2")
	files.WriteAuth(t, after.ServerConfig())
	// n1's worker keeps reading through the reloads: the import it uses is
	// re-subscribed by each reload, which a request may meet.
	probeDone := make(chan struct{})
	var probes, refused int
	var probing sync.WaitGroup
	probing.Go(func() {
		agg := events.NodeAggregate(testRef, "n1")
		for {
			select {
			case <-probeDone:
				return
			default:
			}
			probes++
			if _, err := w1.store.Load(ctx, agg); err != nil {
				refused++
			}
		}
	})
	files.Reload(t)
	d.auth = after
	require.NoError(t, d.queue.EnsureNodeConsumers(ctx, "n2"))
	require.NoError(t, appendResumed(w1, "after one reload"), "n1's worker is served across the reload")

	u2, ok := after.Worker("n2")
	require.True(t, ok)
	nc2, _ := d.connect(u2)
	js2, err := natsauth.JetStream(nc2, after.APIPrefix(u2))
	require.NoError(t, err)
	_, err = eventstore.Open(ctx, natsauth.BindOnly(js2), eventstore.Config{Replicas: servers, ReadOnlySnapshots: true})
	require.Error(t, err, "after one reload the new account's imports answer nothing")
	assert.True(t, errors.Is(err, nats.ErrNoResponders), "no responders behind the new account's imports: %v", err)

	files.Reload(t)
	eventually(t, 30*time.Second, "n2's worker binds after the second reload", func() bool {
		_, err := eventstore.Open(ctx, natsauth.BindOnly(js2), eventstore.Config{Replicas: servers, ReadOnlySnapshots: true})
		return err == nil
	})
	w2 := d.connectWorker("n2")
	require.NoError(t, appendResumed(w2, "after two reloads"))
	_, err = d.queue.Publish(ctx, command("n2", "c1"))
	require.NoError(t, err)
	cons, err := w2.queue.NodeConsumer(ctx, "n2")
	require.NoError(t, err)
	m, err := cons.Next()
	require.NoError(t, err, "n2's worker pulls its command")
	require.NoError(t, m.DoubleAck(ctx))
	close(probeDone)
	probing.Wait()
	t.Logf("n1's loads during the reloads: %d", probes)
	assert.Zero(t, refused, "n1's loads refused during the reloads")
	require.NoError(t, appendResumed(w1, "after two reloads"), "n1's worker is served across both reloads")
	assert.Empty(t, w1.viol.All())
	assert.Empty(t, w2.viol.All())
}
