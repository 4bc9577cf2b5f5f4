package dedup

import (
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
)

func msg(subject, data string, hdr ...string) *nats.Msg {
	m := &nats.Msg{Subject: subject, Data: []byte(data), Header: nats.Header{}}
	for i := 0; i+1 < len(hdr); i += 2 {
		m.Header.Add(hdr[i], hdr[i+1])
	}
	return m
}

func TestSame(t *testing.T) {
	base := msg("sb.evt.a", "{}", "ce-id", "e1", "Nats-Msg-Id", "e1")
	for _, tc := range []struct {
		name string
		b    *nats.Msg
		same bool
	}{
		{"identical", msg("sb.evt.a", "{}", "ce-id", "e1", "Nats-Msg-Id", "e1"), true},
		{"JetStream's headers aside", msg("sb.evt.a", "{}", "ce-id", "e1", "Nats-Msg-Id", "other", "Nats-Expected-Last-Subject-Sequence", "4"), true},
		{"header names in any case", msg("sb.evt.a", "{}", "CE-ID", "e1"), true},
		{"another subject", msg("sb.evt.b", "{}", "ce-id", "e1"), false},
		{"other data", msg("sb.evt.a", "junk", "ce-id", "e1"), false},
		{"another header value", msg("sb.evt.a", "{}", "ce-id", "e2"), false},
		{"a header more", msg("sb.evt.a", "{}", "ce-id", "e1", "ce-type", "x"), false},
		{"a header less", msg("sb.evt.a", "{}"), false},
		{"a value more", msg("sb.evt.a", "{}", "ce-id", "e1", "ce-id", "e1"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.same, Same(base, tc.b))
			assert.Equal(t, tc.same, Same(tc.b, base), "symmetric")
			assert.Equal(t, tc.same, digest(base) == digest(tc.b), "the derived id follows the content")
		})
	}
}

func TestRenameDerivesThenRandomises(t *testing.T) {
	a, b := msg("s", "d", "Nats-Msg-Id", "id"), msg("s", "d", "Nats-Msg-Id", "id")
	for attempt := range derivedIDs {
		Rename(a, attempt)
		Rename(b, attempt)
		assert.Equal(t, a.Header.Get("Nats-Msg-Id"), b.Header.Get("Nats-Msg-Id"), "the same message gets the same derived id")
	}
	Rename(a, derivedIDs)
	Rename(b, derivedIDs)
	assert.NotEqual(t, a.Header.Get("Nats-Msg-Id"), b.Header.Get("Nats-Msg-Id"), "past the derived ids, a random one")
	assert.Contains(t, a.Header.Get("Nats-Msg-Id"), "id~", "the original id stays readable")
}
