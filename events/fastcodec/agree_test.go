package fastcodec_test

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/events/eventstest"
	"github.com/switchback-dev/switchback/events/fastcodec"
)

var (
	testMgr  = events.ManagerRef{Namespace: "longhorn-system", Name: "v2.fast", UID: "5d1f3c2e-7b6a-4f0e-9c8d-1a2b3c4d5e6f"}
	testTime = time.Date(2026, 12, 4, 9, 15, 0, 987654321, time.UTC)
)

func samples() map[events.Type]events.Envelope {
	return eventstest.SamplesByType(testMgr, "worker-1.example.com", testTime)
}

// requireAgrees holds a Decoder to events.Decode: same envelope, or the same
// refusal.
func requireAgrees(t *testing.T, subject string, hdr nats.Header, data []byte) {
	t.Helper()
	requireForeignChecked(t, subject, hdr, data)
	got, err := fastcodec.Decode(subject, hdr, data, 7, nil)
	want, wantErr := events.Decode(subject, hdr, data, 7)
	if wantErr != nil {
		// The kind, not the text: the reference's message depends on
		// header map order (whether ce-type was read before the fault).
		var want, have *events.DecodeError
		require.ErrorAs(t, wantErr, &want)
		require.ErrorAs(t, err, &have)
		assert.Equal(t, want.Kind, have.Kind)
		assert.Equal(t, want.Subject, have.Subject)
		assert.Equal(t, uint64(7), have.Sequence)
		return
	}
	require.NoError(t, err)
	assert.Equal(t, want, got)
}

// requireForeignChecked: a Decoder shows foreign exactly the headers that
// are not the event's own, whichever path decodes, answers foreign's error
// whenever there is such a header, and otherwise answers what it answers
// without foreign.
func requireForeignChecked(t *testing.T, subject string, hdr nats.Header, data []byte) {
	t.Helper()
	want := map[string]bool{}
	for k := range hdr {
		lower := strings.ToLower(k)
		if lower != strings.ToLower(events.HeaderContentType) && !strings.HasPrefix(lower, events.HeaderPrefix) {
			want[k] = true
		}
	}
	seen := map[string]bool{}
	env, err := fastcodec.Decode(subject, hdr, data, 7, func(k string) error { seen[k] = true; return nil })
	assert.Equal(t, want, seen, "headers shown to foreign")
	plainEnv, plainErr := fastcodec.Decode(subject, hdr, data, 7, nil)
	assert.Equal(t, plainEnv, env)
	assert.Equal(t, plainErr == nil, err == nil)

	refuse := errors.New("refused by foreign")
	_, err = fastcodec.Decode(subject, hdr, data, 7, func(string) error { return refuse })
	if len(want) > 0 {
		require.ErrorIs(t, err, refuse)
	} else {
		assert.NotErrorIs(t, err, refuse)
	}
}

// TestFastDecodeAgrees runs every catalogue sample, as Encode writes it and
// with each kind of deviation the fast path must leave to the general one.
func TestFastDecodeAgrees(t *testing.T) {
	tweaks := map[string]func(h nats.Header) string{
		"as encoded":            func(nats.Header) string { return "" },
		"upper-case header":     func(h nats.Header) string { h["Ce-Id"] = h["ce-id"]; delete(h, "ce-id"); return "" },
		"blank around id":       func(h nats.Header) string { h["ce-id"] = []string{" " + h["ce-id"][0]}; return "" },
		"extra extension":       func(h nats.Header) string { h["ce-traceparent"] = []string{"00-abc"}; return "" },
		"two values":            func(h nats.Header) string { h["ce-source"] = append(h["ce-source"], "x"); return "" },
		"source with a colon":   func(h nats.Header) string { h["ce-source"] = []string{"urn:switchback:x"}; return "" },
		"source with an escape": func(h nats.Header) string { h["ce-source"] = []string{"a%20b"}; return "" },
		"authority source":      func(h nats.Header) string { h["ce-source"] = []string{"//host/path"}; return "" },
		"missing time":          func(h nats.Header) string { delete(h, "ce-time"); return "" },
		"zero time":             func(h nats.Header) string { h["ce-time"] = []string{"0001-01-01T00:00:00Z"}; return "" },
		"offset time":           func(h nats.Header) string { h["ce-time"] = []string{"2026-01-02T03:04:05.5+02:00"}; return "" },
		"bad time":              func(h nats.Header) string { h["ce-time"] = []string{"yesterday"}; return "" },
		"content type params":   func(h nats.Header) string { h["content-type"] = []string{"application/json; charset=utf-8"}; return "" },
		"other spec version":    func(h nats.Header) string { h["ce-specversion"] = []string{"0.3"}; return "" },
		"wrong correlation":     func(h nats.Header) string { h["ce-correlationid"] = []string{"other"}; return "" },
		"empty causation":       func(h nats.Header) string { h["ce-causationid"] = []string{""}; return "" },
		"wrong ce-subject":      func(h nats.Header) string { h["ce-subject"] = []string{"a/b"}; return "" },
		"unknown type":          func(h nats.Header) string { h["ce-type"] = []string{"io.switchback.node.nope.v1"}; return "" },
		"foreign type": func(h nats.Header) string {
			h["ce-type"] = []string{"io.switchback.manager.node-scheduled.v1"}
			return ""
		},
		"unrelated header": func(h nats.Header) string { h["X-Trace"] = []string{"1"}; return "" },
		"as Append stores it": func(h nats.Header) string {
			h[jetstream.ExpectedLastSubjSeqHeader] = []string{"12"}
			return ""
		},
		"stored and unrelated headers": func(h nats.Header) string {
			h[jetstream.ExpectedLastSubjSeqHeader] = []string{"12"}
			h["X-Trace"] = []string{"1"}
			return ""
		},
		"in an atomic batch": func(h nats.Header) string {
			h[jetstreamext.BatchIDHeader] = []string{"b1"}
			h[jetstreamext.BatchSeqHeader] = []string{"3"}
			h[jetstreamext.BatchCommitHeader] = []string{"1"}
			return ""
		},
		"no message id":          func(h nats.Header) string { delete(h, events.MsgIDHeader); return "" },
		"message id of no value": func(h nats.Header) string { h[events.MsgIDHeader] = nil; return "" },
		"a header spelt twice":   func(h nats.Header) string { h["Ce-Id"] = h["ce-id"]; return "" },
		"content-type spelt Big": func(h nats.Header) string {
			h["Content-Type"] = h["content-type"]
			delete(h, "content-type")
			return ""
		},
		"trailing data": func(nats.Header) string { return " {}" },
		"not json":      func(nats.Header) string { return "\x00" },
	}
	for typ, env := range samples() {
		for name, tweak := range tweaks {
			t.Run(string(typ)+"/"+name, func(t *testing.T) {
				msg, err := events.Encode(env)
				require.NoError(t, err)
				suffix := tweak(msg.Header)
				requireAgrees(t, msg.Subject, msg.Header, append(msg.Data, suffix...))
			})
		}
	}
}

// FuzzFastDecodeAgrees: for any message, a Decoder and events.Decode give
// the same envelope or the same refusal.
func FuzzFastDecodeAgrees(f *testing.F) {
	eventstest.AddMessageSeeds(f, eventstest.Samples(testMgr, "worker-1.example.com", testTime))
	f.Fuzz(func(t *testing.T, subject, headers string, data []byte) {
		requireAgrees(t, subject, eventstest.SeedHeaders(headers), data)
	})
}

// FuzzFlatJSONAgrees: the flat JSON fast path and encoding/json read any
// data of the hot event types to the same payload, or both refuse it.
func FuzzFlatJSONAgrees(f *testing.F) {
	for _, s := range []string{
		`{"volume":"pvc-1","from":"pending","to":"switching-over","targetNode":"n-2","message":"moving"}`,
		`{"volume":"pvc-1","to":"pending"}`,
		`{"from":"pending","to":"switching-over","message":"x"}`,
		`{"node":"n1","dataEngine":"v2","instanceManagerImage":"im:2","attempt":1}`,
		`{"node":"n1","dataEngine":"v2","instanceManagerImage":"im:2","attempt":-0}`,
		`{"volume":"a","volume":"b","to":"pending"}`,
		`{"volume":"a","to":"pending",}`,
		`{"Volume":"a","to":"pending"}`,
		`{"volume":"a\u0041","to":"pending"}`,
		`{"attempt":01,"node":"n"}`,
		`{"node":"n1","attempt":2}`,
		`{"node":"n1","state":"completed","message":"done"}`,
		`{"message":"every node completed"}`,
		`{}`,
	} {
		for _, typ := range []events.Type{events.TypeVolumeStateChanged, events.TypeNodeStateChanged, events.TypeNodeUpgradeStarted,
			events.TypeNodeScheduled, events.TypeNodeFinished, events.TypeUpgradeCompleted, events.TypeNodeUpgradeCompleted} {
			f.Add(string(typ), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, typ string, data []byte) {
		got, err := fastcodec.DecodeData(events.Type(typ), data)
		want, wantErr := events.DecodeData(events.Type(typ), data)
		require.Equal(t, wantErr == nil, err == nil, "fast: %v, general: %v", err, wantErr)
		assert.Equal(t, want, got)
	})
}

// TestEncodeFastAgrees: Encode writes exactly what events.Encode writes, or
// refuses what it refuses, for every sample and for the envelopes the fast
// path must leave to the reference.
func TestEncodeFastAgrees(t *testing.T) {
	tweaks := map[string]func(e *events.Envelope){
		"as built":              func(*events.Envelope) {},
		"blank around id":       func(e *events.Envelope) { e.ID = " " + e.ID },
		"empty id":              func(e *events.Envelope) { e.ID = "" },
		"url source":            func(e *events.Envelope) { e.Source = "https://example.com/a?b=c" },
		"source with a space":   func(e *events.Envelope) { e.Source = "a b" },
		"empty source":          func(e *events.Envelope) { e.Source = "" },
		"zero time":             func(e *events.Envelope) { e.Time = time.Time{} },
		"local time":            func(e *events.Envelope) { e.Time = e.Time.In(time.FixedZone("x", 3600)) },
		"empty causation":       func(e *events.Envelope) { e.CausationID = "" },
		"no data":               func(e *events.Envelope) { e.Data = nil },
		"invalid payload":       func(e *events.Envelope) { e.Data = events.NodeScheduled{} },
		"foreign payload":       func(e *events.Envelope) { e.Data = events.NodeScheduled{Node: "n", Attempt: 1} },
		"no manager uid":        func(e *events.Envelope) { e.Aggregate.Manager.UID = "" },
		"blank around the name": func(e *events.Envelope) { e.Aggregate.Manager.Namespace = " ns" },
	}
	for typ, env := range samples() {
		for name, tweak := range tweaks {
			t.Run(string(typ)+"/"+name, func(t *testing.T) {
				e := env
				tweak(&e)
				got, err := fastcodec.Encode(e)
				want, wantErr := events.Encode(e)
				if wantErr != nil {
					require.Error(t, err)
					assert.Equal(t, wantErr.Error(), err.Error())
					return
				}
				require.NoError(t, err)
				assert.Equal(t, want, got)
			})
		}
	}
}

// TestDecoderAgreesOverAStream: a Decoder reading a run of events on several
// subjects, a subject that does not parse among them, decodes each exactly as
// events.Decode does.
func TestDecoderAgreesOverAStream(t *testing.T) {
	var msgs []*nats.Msg
	refs := []events.ManagerRef{{Namespace: "ns", Name: "a", UID: "u1"}, {Namespace: "ns", Name: "b", UID: "u2"}}
	for i, typ := range slices.Sorted(maps.Keys(samples())) {
		env := samples()[typ]
		ref := refs[i%2]
		if env.Aggregate.IsNode() {
			env.Aggregate = events.NodeAggregate(ref, env.Aggregate.Node)
		} else {
			env.Aggregate = events.ManagerAggregate(ref)
		}
		if d, ok := env.Data.(events.UpgradeRequested); ok {
			d.Namespace, d.Name, d.UID = ref.Namespace, ref.Name, ref.UID
			env.Data = d
		}
		m, err := events.Encode(env)
		require.NoError(t, err, typ)
		msgs = append(msgs, m, m)
		if i == 3 {
			bad := *m
			bad.Subject = "switchback.not.a.subject"
			msgs = append(msgs, &bad, m)
		}
	}
	var d fastcodec.Decoder
	for i, m := range msgs {
		want, wantErr := events.Decode(m.Subject, m.Header, m.Data, uint64(i+1))
		got, err := d.Decode(m.Subject, m.Header, m.Data, uint64(i+1), nil)
		assert.Equal(t, wantErr, err, "message %d (%s)", i, m.Subject)
		assert.Equal(t, want, got, "message %d (%s)", i, m.Subject)
	}
}

// TestEncodedHeadersAreIndependent: the headers Encode writes share one
// array, yet adding to one changes no other.
func TestEncodedHeadersAreIndependent(t *testing.T) {
	m, err := fastcodec.Encode(samples()[events.TypeVolumeStateChanged])
	require.NoError(t, err)
	before := nats.Header{}
	for k, vs := range m.Header {
		before[k] = slices.Clone(vs)
	}
	for k := range before {
		m.Header.Add(k, "added")
		for other, vs := range before {
			if other != k {
				require.Equal(t, vs, m.Header[other], "adding to %s changed %s", k, other)
			}
		}
		m.Header[k] = before[k]
	}
}

// FuzzParseUTCAgrees: what the fast path of an event's time accepts,
// time.Parse reads to the same instant.
func FuzzParseUTCAgrees(f *testing.F) {
	for _, s := range []string{
		"2026-12-01T22:06:31.123456789Z", "2026-12-01T22:06:31Z", "2026-12-01T22:06:31.5Z",
		"2024-02-29T00:00:00Z", "2025-02-29T00:00:00Z", "2026-13-01T00:00:00Z", "2026-12-01T24:00:00Z",
		"2026-12-01T23:59:60Z", "2026-12-01T22:06:31.Z", "2026-12-01T22:06:31.1234567890Z",
		"2026-12-01T22:06:31+01:00", "0001-01-01T00:00:00Z", "2026-12-01t22:06:31Z", "2026-12-01T22:06:31Z",
		"+026-12-01T22:06:31Z", "2026-12-01T22:06:31,5Z",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := fastcodec.ParseUTC(s)
		if !ok {
			return
		}
		want, err := time.Parse(time.RFC3339Nano, s)
		require.NoError(t, err, "the fast path accepted %q", s)
		require.True(t, want.Equal(got), "%q: fast %v, time.Parse %v", s, got, want)
		require.Equal(t, time.UTC, got.Location())
	})
}

func TestParseUTC(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Time
		ok   bool
	}{
		{"2026-12-01T22:06:31.123456789Z", time.Date(2026, 12, 1, 22, 6, 31, 123456789, time.UTC), true},
		{"2026-12-01T22:06:31.5Z", time.Date(2026, 12, 1, 22, 6, 31, 500000000, time.UTC), true},
		{"2024-02-29T00:00:00Z", time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC), true},
		{"2025-02-29T00:00:00Z", time.Time{}, false},
		{"2026-12-01T22:06:31+01:00", time.Time{}, false}, // time.Parse's to judge
		{"2026-12-01T22:06:31.1234567890Z", time.Time{}, false},
		{"2026-12-01T23:59:60Z", time.Time{}, false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, ok := fastcodec.ParseUTC(tc.in)
			require.Equal(t, tc.ok, ok)
			require.True(t, tc.want.Equal(got), "got %v", got)
		})
	}
}
