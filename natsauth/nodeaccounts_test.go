package natsauth_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/natsauth"
	"github.com/switchback-dev/switchback/topology"
)

// nodeAccountsDeployment runs the node-account layout on servers servers
// (a cluster with the streams at R3 when 3).
func nodeAccountsDeployment(t *testing.T, servers int, nodes ...string) *deployment {
	t.Helper()
	auth, err := natsauth.Generate(natsauth.Config{Nodes: nodes, Account: natsauth.DefaultAccount, NodeAccounts: true})
	require.NoError(t, err)
	if servers == 1 {
		return startDeployment(t, auth)
	}
	return startClusterDeployment(t, auth)
}

// listenerUser is a user without permissions the tests add to a node's or
// the reader's account: it sees whatever is published there (a worker or
// the reader may subscribe only to its inbox, and a worker to its node's
// events).
const listenerUser, listenerPassword = "listener", "listener"

// withListener is the node-account layout on servers servers with
// listenerUser in account.
func withListener(t *testing.T, servers int, account string, nodes ...string) *deployment {
	t.Helper()
	auth, err := natsauth.Generate(natsauth.Config{Nodes: nodes, Account: natsauth.DefaultAccount, NodeAccounts: true})
	require.NoError(t, err)
	configure := func(o *server.Options) {
		auth.Configure(o)
		for _, acc := range o.Accounts {
			if acc.Name == account {
				o.Users = append(o.Users, &server.User{Username: listenerUser, Password: listenerPassword, Account: acc})
			}
		}
	}
	srvs, dial := startServers(t, servers, configure)
	return setUp(t, auth, srvs[0], dial, servers)
}

// TestWholeUpgradeInNodeAccounts runs a complete upgrade with every worker
// alone in its node's account, reaching the streams only through its
// imports, on a single server and on an R3 cluster (atomic batches through
// the imports): the engine needs nothing the layout refuses, and the
// commands a worker refuses are still parked.
func TestWholeUpgradeInNodeAccounts(t *testing.T) {
	for _, servers := range []int{1, 3} {
		t.Run(fmt.Sprintf("R%d", servers), func(t *testing.T) {
			nodes := []string{"n1", "n2", "n3.example.com"}
			d := nodeAccountsDeployment(t, servers, nodes...)
			ref := events.ManagerRef{Namespace: "longhorn-system", Name: "accounts", UID: fmt.Sprintf("uid-accounts-%d", servers)}
			upgradeRefusingBadCommands(t, d, ref, nodes...)
			readAsReader(t, d, ref, 2)
		})
	}
}

// TestNodeAccountRedirectsLandAtHome plays the redirect attacks as a
// compromised worker of n1: a direct get of its own event whose reply names
// JetStream's API (delete or shrink a stream, delete or change another
// node's consumer), another node's command subject (forge or evict its
// commands) or another node's event subject (block its appends). Each
// answer lands in n1's own account, where a listener sees it, and the
// streams, their contents and n2's consumer are as they were. A reply onto
// another node's ack subject the server refuses outright.
func TestNodeAccountRedirectsLandAtHome(t *testing.T) {
	for _, servers := range []int{1, 3} {
		t.Run(fmt.Sprintf("R%d", servers), func(t *testing.T) {
			d := withListener(t, servers, natsauth.NodeAccount(natsauth.DefaultAccount, "n1"), "n1", "n2")
			w := d.connectWorker("n1")
			listener, err := d.dial(nats.UserInfo(listenerUser, listenerPassword))
			require.NoError(t, err)
			agg := events.NodeAggregate(testRef, "n1")
			// An empty message, which the API would take as an empty request.
			ack, err := w.js.Publish(d.ctx, agg.Subject(), nil)
			require.NoError(t, err, "n1 stores on its own subject through its import")
			v := ack.Sequence
			n2Consumer := topology.NodeConsumer("n2")
			targets := []string{
				topology.JSAPI + "STREAM.DELETE." + topology.EventStream,
				topology.JSAPI + "STREAM.DELETE." + topology.CommandStream,
				topology.JSAPI + "STREAM.DELETE." + topology.DeadLetterStream,
				topology.JSAPI + "STREAM.UPDATE." + topology.EventStream,
				topology.JSAPI + "STREAM.PURGE." + topology.EventStream,
				topology.JSAPI + "CONSUMER.DELETE." + topology.CommandStream + "." + n2Consumer,
				topology.JSAPI + "CONSUMER.CREATE." + topology.CommandStream + "." + n2Consumer,
				topology.CommandSubject("n2"),
				events.NodeAggregate(testRef, "n2").Subject(),
			}
			before, queued := streamState(t, d), commandsQueued(t, d)
			// redirect asks for seq with the reply on target until an answer
			// lands at the listener (on a cluster the listener's interest
			// reaches the other servers a moment after it subscribes).
			redirect := func(target string, seq uint64) *nats.Msg {
				landed, err := listener.SubscribeSync(target)
				require.NoError(t, err)
				defer func() { require.NoError(t, landed.Unsubscribe()) }()
				require.NoError(t, listener.Flush())
				deadline := time.Now().Add(10 * time.Second)
				for {
					require.NoError(t, w.nc.PublishRequest(topology.NodeAPIPrefix+"DIRECT.GET."+topology.EventStream, target, fmt.Appendf(nil, `{"seq":%d}`, seq)))
					m, err := landed.NextMsg(200 * time.Millisecond)
					if err == nil {
						return m
					}
					require.True(t, time.Now().Before(deadline), "the answer redirected onto %s lands in n1's account", target)
				}
			}
			for _, target := range targets {
				assert.Equal(t, agg.Subject(), redirect(target, v).Header.Get("Nats-Subject"), "the direct get's answer lands in n1's account")
			}
			// Settling another node's delivery: the server refuses a reply on
			// an ack subject from any client.
			n2Ack := topology.AckPrefix + topology.CommandStream + "." + n2Consumer + ".1.1.1.1.0"
			denied(t, w.viol, n2Ack, func(context.Context) error {
				return w.nc.PublishRequest(topology.NodeAPIPrefix+"DIRECT.GET."+topology.EventStream, n2Ack, fmt.Appendf(nil, `{"seq":%d}`, v))
			})
			// The reader's attack without anything planted: an empty answer.
			assert.Equal(t, "404", redirect(targets[0], 999999).Header.Get("Status"), "the empty answer lands in n1's account too")
			assert.Equal(t, before, streamState(t, d), "every stream and consumer as it was")
			assert.Equal(t, queued, commandsQueued(t, d), "no command forged or evicted")
		})
	}
}

// TestReaderAccountRedirectsLandAtHome plays the reader's attack, which
// needs nothing planted: a direct get of a missing sequence (an empty
// answer, which JetStream's API takes as an empty request) with the reply
// on JetStream's API or a node's command subject. In the reader's own
// account each answer lands at home, where a listener sees it, and the
// streams and consumers are as they were; the reader can create no
// consumer at all.
func TestReaderAccountRedirectsLandAtHome(t *testing.T) {
	for _, servers := range []int{1, 3} {
		t.Run(fmt.Sprintf("R%d", servers), func(t *testing.T) {
			d := withListener(t, servers, natsauth.ReaderAccount(natsauth.DefaultAccount), "n1", "n2")
			r := d.connectReader()
			listener, err := d.dial(nats.UserInfo(listenerUser, listenerPassword))
			require.NoError(t, err)
			before, queued := streamState(t, d), commandsQueued(t, d)
			for _, target := range []string{
				topology.JSAPI + "STREAM.DELETE." + topology.EventStream,
				topology.JSAPI + "STREAM.DELETE." + topology.DeadLetterStream,
				topology.JSAPI + "STREAM.PURGE." + topology.EventStream,
				topology.JSAPI + "CONSUMER.DELETE." + topology.CommandStream + "." + topology.NodeConsumer("n1"),
				topology.CommandSubject("n1"),
			} {
				landed, err := listener.SubscribeSync(target)
				require.NoError(t, err)
				require.NoError(t, listener.Flush())
				deadline := time.Now().Add(10 * time.Second)
				for {
					require.NoError(t, r.nc.PublishRequest(topology.NodeAPIPrefix+"DIRECT.GET."+topology.EventStream, target, []byte(`{"seq":999999}`)))
					m, err := landed.NextMsg(200 * time.Millisecond)
					if err == nil {
						assert.Equal(t, "404", m.Header.Get("Status"), "the empty answer redirected onto %s lands in the reader's account", target)
						break
					}
					require.True(t, time.Now().Before(deadline), "the answer redirected onto %s lands in the reader's account", target)
				}
				require.NoError(t, landed.Unsubscribe())
			}
			assert.Equal(t, before, streamState(t, d), "every stream and consumer as it was")
			assert.Equal(t, queued, commandsQueued(t, d), "no command forged or evicted")
			for _, subject := range []string{
				topology.NodeAPIPrefix + "CONSUMER.CREATE." + topology.EventStream + ".mine",
				topology.NodeAPIPrefix + "CONSUMER.DELETE." + topology.EventStream + "." + topology.OrchestratorConsumer,
				topology.JSAPI + "CONSUMER.DELETE." + topology.EventStream + "." + topology.OrchestratorConsumer,
			} {
				denied(t, r.viol, subject, func(ctx context.Context) error {
					_, err := r.nc.RequestWithContext(ctx, subject, []byte(`{}`))
					return err
				})
			}
		})
	}
}

// commandsQueued is the command stream's message count and last sequence.
func commandsQueued(t *testing.T, d *deployment) [2]uint64 {
	t.Helper()
	s, err := d.js.Stream(d.ctx, topology.CommandStream)
	require.NoError(t, err)
	info, err := s.Info(d.ctx)
	require.NoError(t, err)
	return [2]uint64{info.State.Msgs, info.State.LastSeq}
}

// TestSharedAccountRedirectReachesTheAPI is the server behaviour the node
// accounts defend against: with the worker in the streams' account (the
// layout without NodeAccounts), the same redirected direct get has
// JetStream take its own answer as an API request and delete a stream.
func TestSharedAccountRedirectReachesTheAPI(t *testing.T) {
	d := newDeployment(t, natsauth.Config{Nodes: []string{"n1", "n2"}, Account: natsauth.DefaultAccount})
	w := d.connectWorker("n1")
	// The answer for a missing sequence has an empty body, which the API
	// takes as an empty request.
	require.NoError(t, w.nc.PublishRequest(topology.JSAPI+"DIRECT.GET."+topology.EventStream,
		topology.JSAPI+"STREAM.DELETE."+topology.DeadLetterStream, []byte(`{"seq":999999}`)))
	eventually(t, 10*time.Second, "the dead-letter stream is deleted", func() bool {
		_, err := d.js.Stream(d.ctx, topology.DeadLetterStream)
		return errors.Is(err, jetstream.ErrStreamNotFound)
	})
}
