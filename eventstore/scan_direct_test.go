package eventstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/natsembed/natstest"
)

// scanned is what a scan hands over: the events' sequences and the parked
// messages'.
type scanned struct{ events, parked []uint64 }

func scanAll(t *testing.T, s *eventstore.Store, o eventstore.ScanOptions) scanned {
	t.Helper()
	var out scanned
	require.NoError(t, s.Scan(ctx(t), o, func(e events.Envelope) error {
		out.events = append(out.events, e.Sequence)
		return nil
	}, func(de *events.DecodeError) { out.parked = append(out.parked, de.Sequence) }))
	return out
}

// TestDirectScansReadWhatScansRead: a store that scans by direct batch gets
// (Config.DirectScans) hands over exactly what one scanning with a
// consumer does, over every kind of range and filter (and overlapping
// filters, which a consumer refuses, each message once), with garbage and
// status lookalikes parked alike, in batches smaller than the stream.
func TestDirectScansReadWhatScansRead(t *testing.T) {
	srv := natstest.Start(t)
	_, js := natstest.Connect(t, srv)
	s := openStore(t, js, eventstore.Config{})
	direct := openStore(t, js, eventstore.Config{DirectScans: true, LoadBatch: 7})
	c := ctx(t)
	other := events.ManagerRef{Namespace: "ns", Name: "other", UID: "uid-2"}
	a, b := events.NodeAggregate(mgr, "n1"), events.NodeAggregate(other, "n2")
	var va, vb uint64
	var mid time.Time
	for i := range 30 {
		va = appendResumed(t, c, s, a, va, fmt.Sprintf("a%d", i))
		vb = appendResumed(t, c, s, b, vb, fmt.Sprintf("b%d", i))
		switch i {
		case 10:
			ack, err := js.Publish(c, a.Subject(), []byte("garbage"))
			require.NoError(t, err)
			va = ack.Sequence
		case 20:
			mid = time.Now()
		}
	}
	for _, hdrs := range statusLookalikes {
		publishLookalike(t, js, b.Subject(), hdrs)
	}
	last, err := s.LastSequence(c)
	require.NoError(t, err)

	all := scanAll(t, s, eventstore.ScanOptions{})
	require.Len(t, all.events, 60)
	require.NotEmpty(t, all.parked)
	for _, o := range []eventstore.ScanOptions{
		{},
		{FromSeq: 13},
		{UntilSeq: 21},
		{FromSeq: 5, UntilSeq: 5},
		{FromSeq: last + 1},
		{UntilTime: mid},
		{Subjects: []string{a.Subject()}},
		{Subjects: []string{events.ManagerSubjectPrefix(other) + ".>"}, FromSeq: 9, UntilSeq: 40},
		{Subjects: []string{a.Subject(), b.Subject()}},
		{Subjects: []string{"sb.evt.none.>"}},
	} {
		t.Run(fmt.Sprintf("%+v", o), func(t *testing.T) {
			assert.Equal(t, scanAll(t, s, o), scanAll(t, direct, o))
		})
	}
	// Filters a consumer refuses as overlapping: each message once.
	broad := eventstore.ScanOptions{Subjects: []string{events.ManagerSubjectPrefix(mgr) + ".>"}}
	assert.Equal(t, scanAll(t, s, broad),
		scanAll(t, direct, eventstore.ScanOptions{Subjects: []string{events.ManagerSubjectPrefix(mgr) + ".>", a.Subject()}}))
}
