package fastcodec_test

import (
	"testing"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/events/fastcodec"
)

func BenchmarkEncode(b *testing.B) {
	env := samples()[events.TypeVolumeStateChanged]
	b.ReportAllocs()
	for b.Loop() {
		if _, err := fastcodec.Encode(env); err != nil {
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
		if _, err := fastcodec.Decode(msg.Subject, msg.Header, msg.Data, 1, nil); err != nil {
			b.Fatal(err)
		}
	}
}
