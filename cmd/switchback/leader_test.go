package main

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pattern is a NATS connection whose state follows up, one entry per look,
// repeated; looks counts them.
type pattern struct {
	up    []bool
	looks atomic.Int64
}

func (p *pattern) IsConnected() bool { return p.up[int(p.looks.Add(1)-1)%len(p.up)] }

func TestStepDownWithoutNATS(t *testing.T) {
	const after = 20 * time.Millisecond // ten looks of 2 ms
	down := make([]bool, 1)
	flapping := append(make([]bool, 5), true) // never ten looks in a row without NATS
	for _, tc := range []struct {
		name     string
		up       []bool
		stepDown bool
	}{
		{"NATS lost for good: steps down", down, true},
		{"connected throughout: leads on", []bool{true}, false},
		{"lost for less than a lease at a time: leads on", flapping, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := &pattern{up: tc.up}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			stepped := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				stepDownWithoutNATS(ctx, nc, after, func() { close(stepped) }, slog.New(slog.NewTextHandler(io.Discard, nil)))
			}()
			if tc.stepDown {
				<-stepped
				<-done
				assert.GreaterOrEqual(t, nc.looks.Load(), int64(11), "a lease's worth of looks without NATS, the first one starting the count")
				return
			}
			// Sixty looks: six leases' worth.
			require.Eventually(t, func() bool { return nc.looks.Load() >= 60 }, time.Minute, time.Millisecond)
			cancel()
			<-done
			select {
			case <-stepped:
				t.Fatal("stepped down although NATS never stayed away for a lease")
			default:
			}
		})
	}
}

func TestAwaitNATS(t *testing.T) {
	nc := &pattern{up: []bool{false, false, false, true}}
	require.NoError(t, awaitNATS(context.Background(), nc, time.Millisecond))
	assert.Equal(t, int64(4), nc.looks.Load(), "returns at the first look that finds NATS")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, awaitNATS(ctx, &pattern{up: []bool{false}}, time.Millisecond), context.Canceled)
}
