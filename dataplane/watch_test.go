package dataplane_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/switchback-dev/switchback/dataplane"
)

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestChanges(t *testing.T) {
	tests := []struct {
		name string
		// run takes channels and notifies; it returns the channels with
		// whether each must be closed.
		run func(c *dataplane.Changes) map[<-chan struct{}]bool
	}{
		{"a channel taken before a change is closed by it", func(c *dataplane.Changes) map[<-chan struct{}]bool {
			ch := c.Changed()
			c.Notify()
			return map[<-chan struct{}]bool{ch: true}
		}},
		{"no change, no wake", func(c *dataplane.Changes) map[<-chan struct{}]bool {
			return map[<-chan struct{}]bool{c.Changed(): false}
		}},
		{"a change before the channel is taken does not close it", func(c *dataplane.Changes) map[<-chan struct{}]bool {
			c.Notify()
			return map[<-chan struct{}]bool{c.Changed(): false}
		}},
		{"every waiter wakes, and the next channel waits for the next change", func(c *dataplane.Changes) map[<-chan struct{}]bool {
			a, b := c.Changed(), c.Changed()
			c.Notify()
			return map[<-chan struct{}]bool{a: true, b: true, c.Changed(): false}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c dataplane.Changes
			for ch, want := range tc.run(&c) {
				assert.Equal(t, want, closed(ch))
			}
		})
	}
}
