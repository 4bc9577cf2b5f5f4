package eventstore

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDeliveryOf: both ack subject forms read as nats.go's Metadata reads
// them; anything else falls to Metadata and its error.
func TestDeliveryOf(t *testing.T) {
	for _, tc := range []struct {
		name, reply string
		ok          bool
	}{
		{"v1", "$JS.ACK.EVENTS.c1.1.42.7.1764590400000000000.3", true},
		{"v2 with the random token", "$JS.ACK._.ACCHASH.EVENTS.c1.1.42.7.1764590400000000000.3.xyz", true},
		{"v2 without it", "$JS.ACK.hub.ACCHASH.EVENTS.c1.1.42.7.1764590400000000000.3", true},
		{"too few tokens", "$JS.ACK.EVENTS.c1.1.42.7", false},
		{"a number that is not one", "$JS.ACK.EVENTS.c1.1.4x2.7.1764590400000000000.3", false},
		{"not an ack subject", "_INBOX.abc", false},
		{"too many tokens", "$JS.ACK.a.b.c.d.1.42.7.1764590400000000000.3.x.y", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &nats.Msg{Reply: tc.reply, Sub: &nats.Subscription{}}
			got, err := deliveryOf(m)
			md, mdErr := m.Metadata()
			if !tc.ok {
				_, parsed := parseAckReply(tc.reply)
				assert.False(t, parsed)
				if mdErr != nil {
					assert.Error(t, err, "Metadata's refusal is deliveryOf's")
					return
				}
			}
			require.NoError(t, mdErr)
			require.NoError(t, err)
			assert.Equal(t, delivery{stream: md.Sequence.Stream, consumer: md.Sequence.Consumer, pending: md.NumPending, at: md.Timestamp}, got)
			if tc.ok {
				assert.Equal(t, delivery{stream: 42, consumer: 7, pending: 3, at: time.Unix(0, 1764590400000000000)}, got)
			}
		})
	}
}

// FuzzDecimalAgrees: decimal reads what strconv.ParseUint reads in base
// 10, where that is digits alone, and refuses the rest.
func FuzzDecimalAgrees(f *testing.F) {
	for _, s := range []string{"0", "42", "007", "18446744073709551615", "18446744073709551616", "99999999999999999999", "000000000000000000000042", "", "-1", "+1", "1_000", "4x2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := decimal(s)
		want, err := strconv.ParseUint(s, 10, 64)
		digitsOnly := s != "" && strings.Trim(s, "0123456789") == ""
		require.Equal(t, err == nil && digitsOnly, ok, "%q", s)
		if ok {
			require.Equal(t, want, got, "%q", s)
		}
	})
}
