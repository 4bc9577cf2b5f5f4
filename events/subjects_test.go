package events_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/events/eventstest"
)

func TestSubjects(t *testing.T) {
	cases := []struct {
		agg  events.AggregateID
		want string
	}{
		{events.ManagerAggregate(events.ManagerRef{Namespace: "longhorn-system", Name: "up-1", UID: "u-1"}), "sb.evt.longhorn-system.up-1.u-1.mgr"},
		{events.NodeAggregate(events.ManagerRef{Namespace: "ns", Name: "a.b", UID: "u"}, "node-1.zone.example.com"), "sb.evt.ns.a_b.u.node.node-1_zone_example_com"},
		{events.NodeAggregate(events.ManagerRef{Namespace: "ns", Name: "m", UID: "u"}, "Weird_*>"), "sb.evt.ns.m.u.node.~57eird~5F~2A~3E"},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.agg.Subject())
			got, err := events.ParseSubject(tc.want)
			require.NoError(t, err)
			assert.Equal(t, tc.agg, got)
		})
	}
}

func TestParseSubjectRejects(t *testing.T) {
	for _, s := range []string{
		"", "sb.evt", "sb.evt.ns.m.u", "sb.evt.ns.m.u.mgr.extra", "sb.evt.ns.m.u.node", "sb.evt.ns.m.u.vol.x",
		"other.evt.ns.m.u.mgr", "sb.evt.ns.m.~.mgr", "sb.evt.NS.m.u.mgr", "sb.evt.ns.m.u.node.~2", "sb.evt.ns.m.u.node.~61",
		"sb.evt.ns.m.u.node.~2e",
	} {
		t.Run(s, func(t *testing.T) {
			_, err := events.ParseSubject(s)
			assert.Error(t, err)
		})
	}
}

func FuzzTokenRoundTrip(f *testing.F) {
	for _, s := range []string{"", "a", "node-1.example.com", "_", "~", "Ünïcode", "a.b_c~d*e>f g"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok := events.EncodeToken(s)
		if strings.ContainsAny(tok, ".*> \t\r\n") || tok == "" {
			t.Fatalf("EncodeToken(%q) = %q is not a valid subject token", s, tok)
		}
		back, err := events.DecodeToken(tok)
		if err != nil || back != s {
			t.Fatalf("DecodeToken(EncodeToken(%q)) = %q, %v", s, back, err)
		}
		// Any token either decodes canonically or is rejected; never panics.
		if d, err := events.DecodeToken(s); err == nil && events.EncodeToken(d) != s {
			t.Fatalf("DecodeToken(%q) accepted a non-canonical token", s)
		}
	})
}

func FuzzDecode(f *testing.F) {
	eventstest.AddMessageSeeds(f, eventstest.Samples(testMgr, "worker-1.example.com", testTime))
	f.Fuzz(func(t *testing.T, subject, headers string, data []byte) {
		env, err := events.Decode(subject, eventstest.SeedHeaders(headers), data, 1)
		if err != nil {
			var de *events.DecodeError
			if !assert.ErrorAs(t, err, &de) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
			return
		}
		// Whatever decodes must encode again to an equivalent message.
		msg, err := events.Encode(env)
		require.NoError(t, err)
		again, err := events.Decode(msg.Subject, msg.Header, msg.Data, 1)
		require.NoError(t, err)
		assert.Equal(t, env.Data, again.Data)
		assert.Equal(t, env.Aggregate, again.Aggregate)
	})
}

func TestManagerNameSubjects(t *testing.T) {
	for _, tc := range []struct{ namespace, name, want string }{
		{"longhorn-system", "upgrade-v2", "sb.evt.longhorn-system.upgrade-v2.>"},
		{"", "upgrade-v2", "sb.evt.*.upgrade-v2.>"},
		{"ns", "a.b", "sb.evt.ns." + events.EncodeToken("a.b") + ".>"},
	} {
		assert.Equal(t, tc.want, events.ManagerNameSubjects(tc.namespace, tc.name))
	}
	ref := events.ManagerRef{Namespace: "ns", Name: "m", UID: "u1"}
	assert.True(t, strings.HasPrefix(events.ManagerSubjectPrefix(ref), strings.TrimSuffix(events.ManagerNameSubjects("ns", "m"), ">")), "every incarnation's subjects match")
}
