package natsauth

import (
	"errors"
	"fmt"
	"strings"

	"github.com/switchback-dev/switchback/topology"
)

// DefaultAccount is the account `switchback nats-auth` puts Switchback in:
// an account of its own is what lets the server bound it (Limits).
const DefaultAccount = "SWITCHBACK"

// Limits are the JetStream limits of Switchback's account. Every client of
// the account counts against them: the controller, which creates the
// streams, but also the reader, which may create consumers (ordered reads),
// and the workers, whose events fill the event stream.
type Limits struct {
	// MaxStreams bounds the streams of the account; Switchback has
	// DefaultLimits' four (events, commands, dead letters and the snapshot
	// bucket's stream), so a fifth, created by whoever holds the
	// controller's key, is refused.
	MaxStreams int
	// MaxConsumers bounds the consumers of each stream: the command
	// stream holds one per node, so it must exceed the cluster's nodes; the
	// bound stops a reader creating consumers without end.
	MaxConsumers int
	// MaxStore bounds the account's file storage in bytes, every replica
	// counted (an R3 stream of 1 GiB uses 3 GiB). Streams with a size
	// bound reserve it whole: the command stream's 1 GiB and the dead
	// letters' 256 MiB, 3.75 GiB at R3.
	MaxStore int64
}

// DefaultLimits fit deploy/nats: three servers of 10 GiB of JetStream each,
// so 24 GiB across the replicas leaves every server 2 GiB of its own.
// No memory storage is allowed at all: every Switchback stream is on disk,
// and a memory stream would take the servers' RAM.
var DefaultLimits = Limits{MaxStreams: 4, MaxConsumers: 4096, MaxStore: 24 << 30}

// minStore is what the streams' reservations need at R3 (MaxStore's doc).
const minStore = 3 * (topology.MaxCommandStreamBytes + topology.MaxDeadLetterStreamBytes)

func (l Limits) withDefaults(account string) (Limits, error) {
	if account == "" {
		if l != (Limits{}) {
			return l, errors.New("natsauth: JetStream limits need an account: the global account has none")
		}
		return l, nil
	}
	if l.MaxStreams == 0 {
		l.MaxStreams = DefaultLimits.MaxStreams
	}
	if l.MaxConsumers == 0 {
		l.MaxConsumers = DefaultLimits.MaxConsumers
	}
	if l.MaxStore == 0 {
		l.MaxStore = DefaultLimits.MaxStore
	}
	switch {
	case l.MaxStreams < DefaultLimits.MaxStreams:
		return l, fmt.Errorf("natsauth: max streams %d: Switchback has %d", l.MaxStreams, DefaultLimits.MaxStreams)
	case l.MaxConsumers < 8:
		return l, fmt.Errorf("natsauth: max consumers %d per stream: the command stream needs one per node", l.MaxConsumers)
	case l.MaxStore < minStore:
		return l, fmt.Errorf("natsauth: max store %d bytes: the streams reserve %d at three replicas", l.MaxStore, minStore)
	}
	return l, nil
}

// render writes the account's jetstream block.
func (l Limits) render(b *strings.Builder, indent string) {
	fmt.Fprintf(b, "%sjetstream {\n", indent)
	fmt.Fprintf(b, "%s  max_streams: %d\n", indent, l.MaxStreams)
	fmt.Fprintf(b, "%s  max_consumers: %d\n", indent, l.MaxConsumers)
	fmt.Fprintf(b, "%s  max_file: %d\n", indent, l.MaxStore)
	fmt.Fprintf(b, "%s  max_mem: 0\n", indent)
	fmt.Fprintf(b, "%s}\n", indent)
}
