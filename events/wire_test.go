package events_test

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/events"
)

func TestEveryTypeRoundTripsThroughNATSHeaders(t *testing.T) {
	s := samples()
	require.ElementsMatch(t, events.Types(), keys(s), "samples must cover the whole catalogue")
	for typ, env := range s {
		t.Run(string(typ), func(t *testing.T) {
			msg, err := events.Encode(env)
			require.NoError(t, err)
			assert.Equal(t, env.Aggregate.Subject(), msg.Subject)
			assert.Equal(t, "1.0", msg.Header.Get("ce-specversion"))
			assert.Equal(t, string(typ), msg.Header.Get("ce-type"))
			assert.Equal(t, env.ID, msg.Header.Get("ce-id"))
			assert.Equal(t, env.ID, msg.Header.Get(events.MsgIDHeader))
			assert.Equal(t, env.Aggregate.String(), msg.Header.Get("ce-subject"))
			assert.Equal(t, testMgr.UID, msg.Header.Get("ce-correlationid"))
			assert.Equal(t, "application/json", msg.Header.Get("content-type"))
			for k := range msg.Header {
				if strings.HasPrefix(strings.ToLower(k), "ce-") {
					assert.Equal(t, strings.ToLower(k), k, "binary mode headers are lower-case")
				}
			}
			got, err := events.Decode(msg.Subject, msg.Header, msg.Data, 42)
			require.NoError(t, err)
			want := env
			want.Sequence = 42
			assert.Equal(t, want, got)
		})
	}
}

func keys[K comparable, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestDecodeRejectsBadMessagesWithTypedErrors(t *testing.T) {
	good, err := events.Encode(samples()[events.TypeNodeStateChanged])
	require.NoError(t, err)
	cases := []struct {
		name    string
		mutate  func(m *nats.Msg)
		wantErr error
	}{
		{"missing specversion", func(m *nats.Msg) { m.Header.Del("ce-specversion") }, events.ErrBadHeader},
		{"unsupported specversion", func(m *nats.Msg) { m.Header.Set("ce-specversion", "9.9") }, events.ErrBadHeader},
		{"missing id", func(m *nats.Msg) { m.Header.Del("ce-id") }, events.ErrBadHeader},
		{"missing source", func(m *nats.Msg) { m.Header.Del("ce-source") }, events.ErrBadHeader},
		{"bad time", func(m *nats.Msg) { m.Header.Set("ce-time", "yesterday") }, events.ErrBadHeader},
		{"missing causation", func(m *nats.Msg) { m.Header.Del("ce-causationid") }, events.ErrBadHeader},
		{"xml content", func(m *nats.Msg) { m.Header.Set("content-type", "application/xml") }, events.ErrBadHeader},
		{"repeated header", func(m *nats.Msg) { m.Header.Add("ce-type", "x") }, events.ErrBadHeader},
		{"no headers at all", func(m *nats.Msg) { m.Header = nats.Header{} }, events.ErrBadHeader},
		{"unknown type", func(m *nats.Msg) { m.Header.Set("ce-type", "io.switchback.node.teleported.v1") }, events.ErrUnknownType},
		{"future version", func(m *nats.Msg) { m.Header.Set("ce-type", "io.switchback.node.state-changed.v9") }, events.ErrUnknownType},
		{"bad json", func(m *nats.Msg) { m.Data = []byte(`{"from":`) }, events.ErrBadData},
		{"json array", func(m *nats.Msg) { m.Data = []byte(`[1,2]`) }, events.ErrBadData},
		{"trailing data", func(m *nats.Msg) { m.Data = append(m.Data, []byte(`{}`)...) }, events.ErrBadData},
		{"unknown state", func(m *nats.Msg) { m.Data = []byte(`{"from":"pending","to":"exploded"}`) }, events.ErrBadData},
		{"oversized", func(m *nats.Msg) { m.Data = make([]byte, events.MaxDataBytes+1) }, events.ErrTooLarge},
		{"subject outside stream", func(m *nats.Msg) { m.Subject = "foo.bar" }, events.ErrWrongSubject},
		{"other node's subject", func(m *nats.Msg) {
			m.Subject = events.NodeAggregate(testMgr, "worker-2").Subject()
		}, events.ErrWrongSubject},
		{"other manager's uid", func(m *nats.Msg) { m.Header.Set("ce-correlationid", "other") }, events.ErrWrongSubject},
		{"node event on manager subject", func(m *nats.Msg) {
			m.Subject = events.ManagerAggregate(testMgr).Subject()
			m.Header.Set("ce-subject", testMgr.String())
		}, events.ErrWrongSubject},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := nats.NewMsg(good.Subject)
			for k, v := range good.Header {
				m.Header[k] = append([]string(nil), v...)
			}
			m.Data = append([]byte(nil), good.Data...)
			tc.mutate(m)
			_, err := events.Decode(m.Subject, m.Header, m.Data, 7)
			require.Error(t, err)
			assert.ErrorIs(t, err, tc.wantErr)
			var de *events.DecodeError
			require.ErrorAs(t, err, &de)
			assert.Equal(t, uint64(7), de.Sequence)
			assert.Equal(t, m.Subject, de.Subject)
		})
	}
}

func TestHeadersAreMatchedCaseInsensitively(t *testing.T) {
	env := samples()[events.TypeNodeResumed]
	msg, err := events.Encode(env)
	require.NoError(t, err)
	upper := nats.Header{}
	for k, v := range msg.Header {
		upper[strings.ToUpper(k)] = v
	}
	got, err := events.Decode(msg.Subject, upper, msg.Data, 1)
	require.NoError(t, err)
	assert.Equal(t, env.ID, got.ID)
}

func TestEncodeRefusesInvalidEvents(t *testing.T) {
	node := events.NodeAggregate(testMgr, "n1")
	cases := []struct {
		name string
		env  events.Envelope
	}{
		{"missing required field", events.New(node, "s", "c", testTime, events.NodeStalled{Step: events.NodeSwitchingOver})[0]},
		{"manager event on node aggregate", events.New(node, "s", "c", testTime, events.UpgradeCompleted{})[0]},
		{"no uid", events.New(events.NodeAggregate(events.ManagerRef{Namespace: "a", Name: "b"}, "n"), "s", "c", testTime, events.NodeResumed{Step: events.NodePending})[0]},
		{"no source", events.New(node, "", "c", testTime, events.NodeResumed{Step: events.NodePending})[0]},
		{"nil data", events.Envelope{ID: "x", Source: "s", Aggregate: node}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := events.Encode(tc.env)
			assert.Error(t, err)
		})
	}
}

func TestDeriveIDIsDeterministicAndDistinct(t *testing.T) {
	agg := events.NodeAggregate(testMgr, "n1")
	a := events.New(agg, "s", "cmd-1", testTime, events.NodeResumed{Step: events.NodePending}, events.NodeResumed{Step: events.NodePending})
	b := events.New(agg, "s", "cmd-1", testTime.Add(1), events.NodeResumed{Step: events.NodePending})
	assert.Equal(t, a[0].ID, b[0].ID, "a retried command yields the same id, whatever the clock says")
	assert.NotEqual(t, a[0].ID, a[1].ID)
	assert.NotEqual(t, a[0].ID, events.DeriveID(events.NodeAggregate(testMgr, "n2"), "cmd-1", 0))
}

func TestUpcasterDecodesOldHistory(t *testing.T) {
	// A hypothetical v0 of state-changed named its fields differently; the
	// upcaster maps it to the current payload so old history still folds.
	old := events.Type("io.switchback.node.state-changed.v0")
	events.RegisterUpcaster(old, func(data []byte) (events.Event, error) {
		return events.NodeStateChanged{From: events.NodePending, To: events.NodeInitializing, Message: string(data)}, nil
	})
	ev, err := events.DecodeData(old, []byte("legacy"))
	require.NoError(t, err)
	assert.Equal(t, events.NodeStateChanged{From: events.NodePending, To: events.NodeInitializing, Message: "legacy"}, ev)
	assert.Panics(t, func() { events.RegisterUpcaster(events.TypeNodeStateChanged, nil) })
}
