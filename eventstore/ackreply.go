package eventstore

import (
	"math"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/switchback-dev/switchback/topology"
)

// delivery is what an ordered read needs of a delivered message's reply
// subject.
type delivery struct {
	stream, consumer, pending uint64
	at                        time.Time
}

// deliveryOf reads m's reply subject, JetStream's ack subject,
// $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<tm>.<pending>, or
// the newer form with the domain and account hash after "$JS.ACK." and a
// token of its own at the end. It reads the five numbers in place: a replay
// parses one reply per event, and nats.go's Metadata allocates and keeps
// what an ordered read does not use. Any other shape goes to Metadata,
// which says what is wrong.
func deliveryOf(m *nats.Msg) (delivery, error) {
	if d, ok := parseAckReply(m.Reply); ok {
		return d, nil
	}
	md, err := m.Metadata()
	if err != nil {
		return delivery{}, err
	}
	return delivery{stream: md.Sequence.Stream, consumer: md.Sequence.Consumer, pending: md.NumPending, at: md.Timestamp}, nil
}

// parseAckReply parses the two forms deliveryOf describes; ok is false for
// anything else.
func parseAckReply(reply string) (d delivery, ok bool) {
	rest, ok := strings.CutPrefix(reply, topology.AckPrefix)
	if !ok {
		return delivery{}, false
	}
	var tok [10]string
	n := 0
	for ; n < len(tok) && rest != ""; n++ {
		t, after, found := strings.Cut(rest, ".")
		tok[n], rest = t, after
		if !found {
			rest = ""
		}
	}
	var nums []string
	switch {
	case rest != "":
		return delivery{}, false
	case n == 7:
		nums = tok[2:7] // after the stream and the consumer
	case n == 9 || n == 10:
		nums = tok[4:9] // after the domain, account hash, stream and consumer
	default:
		return delivery{}, false
	}
	var v [5]uint64
	for i, s := range nums {
		if v[i], ok = decimal(s); !ok {
			return delivery{}, false
		}
	}
	// delivered, stream sequence, consumer sequence, time, pending
	return delivery{stream: v[1], consumer: v[2], at: time.Unix(0, int64(v[3])), pending: v[4]}, true
}

// decimal reads s, ASCII digits only, as strconv.ParseUint(s, 10, 64) does,
// without its generality (bases, underscores, error values): five numbers
// of every delivered event's reply are read with it.
func decimal(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (math.MaxUint64-d)/10 {
			return 0, false // overflows
		}
		n = n*10 + d
	}
	return n, true
}
