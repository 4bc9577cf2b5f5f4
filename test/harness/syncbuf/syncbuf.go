// Package syncbuf is a text buffer that one goroutine (a server's log, a
// process's output) writes while a test reads it.
package syncbuf

import (
	"strings"
	"sync"
)

// Buffer is safe for concurrent Write and String. The zero value is empty
// and ready.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
