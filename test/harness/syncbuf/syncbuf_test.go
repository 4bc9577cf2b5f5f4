package syncbuf

import (
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Concurrent writers lose nothing (run with -race to check the locking).
func TestConcurrentWrites(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				_, _ = b.Write([]byte("x"))
			}
		})
	}
	wg.Wait()
	assert.Equal(t, strings.Repeat("x", 800), b.String())
}
