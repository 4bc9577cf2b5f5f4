package natsembed

import (
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// A port FreePort hands out lies below the ephemeral range (where an
// outgoing connection could take it before the listener binds) and binds.
func TestFreePortIsOutsideTheEphemeralRange(t *testing.T) {
	seen := map[int]bool{}
	for range 20 {
		p, err := FreePort("127.0.0.1")
		require.NoError(t, err)
		require.GreaterOrEqual(t, p, lowestPort)
		require.Less(t, p, ephemeralLow())
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		require.NoError(t, err, "port %d", p)
		l.Close()
		seen[p] = true
	}
	require.Greater(t, len(seen), 1, "ports are spread, not one fixed value")
}
