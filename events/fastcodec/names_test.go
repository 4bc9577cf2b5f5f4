package fastcodec

import (
	"strconv"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNamesShareAndStayBounded: a name seen before is the same string (one
// allocation for all its events), a nil table shares nothing, and the table
// never holds more than maxNames.
func TestNamesShareAndStayBounded(t *testing.T) {
	var nilNames *names
	assert.Equal(t, "pvc-1", nilNames.get([]byte("pvc-1")))

	var ns names
	first := ns.get([]byte("pvc-1"))
	again := ns.get([]byte("pvc-1"))
	require.Equal(t, "pvc-1", again)
	assert.Same(t, unsafe.StringData(first), unsafe.StringData(again), "a repeated name is shared")
	assert.Equal(t, "pvc-2", ns.get([]byte("pvc-2")))

	for i := range 3 * maxNames {
		name := "vol-" + strconv.Itoa(i)
		require.Equal(t, name, ns.get([]byte(name)))
		require.LessOrEqual(t, len(ns.m), maxNames)
	}
}
