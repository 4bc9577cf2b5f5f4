//go:build linux

package faults

import (
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestQuantiles(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var ds []time.Duration
		for _, x := range v {
			ds = append(ds, time.Duration(x)*time.Millisecond)
		}
		return ds
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i
	}
	for _, tc := range []struct {
		name           string
		in             []time.Duration
		p50, p99, most time.Duration
	}{
		{"one", ms(7), 7 * time.Millisecond, 7 * time.Millisecond, 7 * time.Millisecond},
		{"two", ms(9, 1), time.Millisecond, 9 * time.Millisecond, 9 * time.Millisecond},
		{"odd, unsorted", ms(5, 1, 3), 3 * time.Millisecond, 5 * time.Millisecond, 5 * time.Millisecond},
		{"a hundred: nearest rank", ms(hundred...), 50 * time.Millisecond, 99 * time.Millisecond, 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, ok := quantiles(tc.in)
			require.True(t, ok)
			assert.Equal(t, quantile{tc.p50, tc.p99, tc.most}, q)
		})
	}
	_, ok := quantiles(nil)
	assert.False(t, ok, "no samples, no quantiles")
}

// Each kind's slug is one benchmark name's token, distinct from the
// others', and cannot be mistaken for the -CPU suffix go test adds.
func TestKindSlugs(t *testing.T) {
	token := regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	seen := map[string]faultKind{}
	for _, k := range faultKinds {
		s := kindSlug(k)
		assert.Regexp(t, token, s, "%q", k)
		assert.NotRegexp(t, `-[0-9]+$`, s, "%q ends like a -CPU suffix", k)
		if other, dup := seen[s]; dup {
			t.Errorf("%q and %q share the slug %q", k, other, s)
		}
		seen[s] = k
	}
	assert.Equal(t, "kill-9-a-worker", kindSlug(fkWorkerKill))
	assert.Equal(t, "controller-partitioned-from-nats", kindSlug(fkControllerNATS), "every word kept, capitals too")
	assert.NotContains(t, seen, "any", "the row over every kind is named apart from them")
}
