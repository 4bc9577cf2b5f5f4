package events_test

import (
	"testing"

	"github.com/switchback-dev/switchback/events"
)

func BenchmarkEncode(b *testing.B) {
	env := samples()[events.TypeVolumeStateChanged]
	b.ReportAllocs()
	for b.Loop() {
		if _, err := events.Encode(env); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	msg, err := events.Encode(samples()[events.TypeVolumeStateChanged])
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := events.Decode(msg.Subject, msg.Header, msg.Data, 1); err != nil {
			b.Fatal(err)
		}
	}
}
