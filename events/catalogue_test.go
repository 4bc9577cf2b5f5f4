package events_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/events/eventstest"
)

var (
	testMgr  = events.ManagerRef{Namespace: "longhorn-system", Name: "upgrade.v2-1", UID: "0c6f6c1e-8a8e-4c38-9d3a-5e7f1a2b3c4d"}
	testTime = time.Date(2026, 11, 29, 18, 30, 0, 123456789, time.UTC)
)

func samples() map[events.Type]events.Envelope {
	out := map[events.Type]events.Envelope{}
	for _, e := range eventstest.Samples(testMgr, "worker-1.example.com", testTime) {
		out[e.Type()] = e
	}
	return out
}

// addSampleSeeds seeds a fuzz target over (subject, headers, data) with the
// encoding of every sample event, its headers one "key:value" a line (the
// form seedHeaders reads back).
func addSampleSeeds(f *testing.F) {
	for _, env := range samples() {
		msg, err := events.Encode(env)
		if err != nil {
			f.Fatal(err)
		}
		var hdr strings.Builder
		for k, v := range msg.Header {
			hdr.WriteString(k + ":" + v[0] + "\n")
		}
		f.Add(msg.Subject, hdr.String(), msg.Data)
	}
}

// seedHeaders reads the headers of a fuzz input written by addSampleSeeds:
// one "key:value" a line; a line with no colon is passed over.
func seedHeaders(headers string) nats.Header {
	hdr := nats.Header{}
	for _, line := range strings.Split(headers, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			hdr[k] = append(hdr[k], v)
		}
	}
	return hdr
}
