package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestReadsRefuseADirectoryWithoutHistory: replay and history on a
// mistyped --data-dir, or on a directory that holds no Switchback store,
// fail saying so and create nothing there.
func TestReadsRefuseADirectoryWithoutHistory(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "typo")
	empty := t.TempDir()
	for _, args := range [][]string{
		{"replay", "--data-dir", missing},
		{"history", "any", "--data-dir", missing},
	} {
		code, _, stderr := runCmd(t, 30*time.Second, args...)
		assert.Equal(t, 1, code, "%v", args)
		assert.Contains(t, stderr, "--data-dir "+missing)
		assert.NoDirExists(t, missing, "nothing is created")
	}
	code, _, stderr := runCmd(t, 30*time.Second, "replay", "--data-dir", empty)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "holds no Switchback history")
	entries, err := os.ReadDir(empty)
	assert.NoError(t, err)
	assert.Empty(t, entries, "nothing is written there")
}
