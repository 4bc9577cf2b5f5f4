// Package goldentest is what the golden-file tests of the data-plane writes
// (packages longhorn and nodeworker) share: a record of lines that the
// upgrade's goroutines append to, and its comparison with a file under
// testdata/ that -update rewrites.
package goldentest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Lines is a record of lines, safe for concurrent use. The zero value is
// empty and ready.
type Lines struct {
	mu    sync.Mutex
	lines []string
	// run names the concurrent phase the last lines belong to (AddSorted),
	// "" after any other line; runStart is where its lines begin.
	run      string
	runStart int
}

// Add appends line.
func (l *Lines) Add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.run = ""
	l.lines = append(l.lines, line)
}

// AddSorted records line as one call of the concurrent phase run (the
// worker's snapshot calls, made several at once, answer in any order): the
// consecutive lines of one run are kept sorted, and a line the run already
// holds (a call retried) is recorded once. What comes before and after the
// run keeps its order.
func (l *Lines) AddSorted(run, line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.run != run {
		l.run, l.runStart = run, len(l.lines)
	}
	i, found := slices.BinarySearch(l.lines[l.runStart:], line)
	if !found {
		l.lines = slices.Insert(l.lines, l.runStart+i, line)
	}
}

// AddUnlessRepeated appends line unless it is the last line already: a
// write retried at once is recorded once.
func (l *Lines) AddUnlessRepeated(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.lines); n == 0 || l.lines[n-1] != line {
		l.run = ""
		l.lines = append(l.lines, line)
	}
}

// String is every line so far, in order, each ended by a newline.
func (l *Lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n") + "\n"
}

// Compare asserts that got is the content of the golden file path (what
// names got in the failure message). With update it first writes got
// there, creating the file's directory.
func Compare(t testing.TB, path, got string, update bool, what string) {
	t.Helper()
	if update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run with -update to create it")
	assert.Equal(t, string(want), got, what)
}
