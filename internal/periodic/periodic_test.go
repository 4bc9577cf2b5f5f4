package periodic_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchback-dev/switchback/internal/periodic"
)

func TestEveryCallsUntilTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		periodic.Every(ctx, time.Millisecond, func() {
			if calls.Add(1) == 3 {
				cancel()
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Every did not return after its context ended")
	}
	// A tick ready with the end may still be taken: at least the three.
	if n := calls.Load(); n < 3 {
		t.Fatalf("calls = %d, want at least 3", n)
	}
}

func TestEveryReturnsAtOnceOnAnEndedContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	periodic.Every(ctx, time.Hour, func() { t.Error("f called on an ended context") })
}
