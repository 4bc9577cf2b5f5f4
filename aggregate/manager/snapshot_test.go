package manager

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// requireJSONRoundTrip checks that s survives JSON encoding unchanged, which
// state snapshots rely on.
func requireJSONRoundTrip(t testing.TB, s State) {
	t.Helper()
	b, err := json.Marshal(s)
	require.NoError(t, err)
	var back State
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, s, back)
}
