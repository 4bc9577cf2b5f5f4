package eventstest

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/switchback-dev/switchback/events"
)

// AddMessageSeeds seeds a fuzz target over (subject, headers, data) with the
// encoding of every envelope, its headers one "key:value" a line (the form
// SeedHeaders reads back).
func AddMessageSeeds(f *testing.F, envs []events.Envelope) {
	f.Helper()
	for _, env := range envs {
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

// SeedHeaders reads the headers of a fuzz input written by AddMessageSeeds:
// one "key:value" a line; a line with no colon is passed over.
func SeedHeaders(headers string) nats.Header {
	hdr := nats.Header{}
	for _, line := range strings.Split(headers, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			hdr[k] = append(hdr[k], v)
		}
	}
	return hdr
}
