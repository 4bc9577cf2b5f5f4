package commands

import (
	"context"
	"fmt"
	"sync"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
)

// StateCache keeps the last folded state of recently used aggregates, so a
// load reads only the events stored since (one direct batch get) instead of a
// snapshot plus tail. The manager aggregate needs it: its state grows with
// the node count and it is loaded several times per node, so decoding a
// snapshot on every load made a whole upgrade quadratic in the node count.
//
// It is safe because history is append-only and states are values (Evolve
// never modifies the maps or slices of the state it is given): a cached state
// at version V plus the events after V is exactly the fold of the whole
// history. A stale entry costs nothing but reading a longer tail. Callers
// must not modify the maps or slices of a state they got from Load.
type StateCache[S any] struct {
	mu      sync.Mutex
	max     int
	clock   uint64
	entries map[cacheKey]*cacheEntry[S]
}

type cacheKey struct {
	store *eventstore.Store
	agg   events.AggregateID
}

type cacheEntry[S any] struct {
	state   S
	version uint64
	// sinceSnapshot counts events folded since the stored snapshot was
	// written, so the snapshot (what a restarted process starts from) keeps
	// being refreshed at the machine's pace.
	sinceSnapshot int
	used          uint64
}

// NewStateCache returns a cache holding at most max aggregates; the least
// recently used one is dropped first.
func NewStateCache[S any](max int) *StateCache[S] {
	return &StateCache[S]{max: max, entries: make(map[cacheKey]*cacheEntry[S], max)}
}

func (c *StateCache[S]) get(k cacheKey) (cacheEntry[S], bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok {
		return cacheEntry[S]{}, false
	}
	c.clock++
	e.used = c.clock
	return *e, true
}

// put stores e unless a newer version is already cached (two loads racing).
func (c *StateCache[S]) put(k cacheKey, e cacheEntry[S]) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.entries[k]; ok && old.version > e.version {
		return
	}
	c.clock++
	e.used = c.clock
	c.entries[k] = &e
	if len(c.entries) <= c.max {
		return
	}
	var oldest cacheKey
	var oldestUsed uint64
	first := true
	for key, v := range c.entries {
		if first || v.used < oldestUsed {
			oldest, oldestUsed, first = key, v.used, false
		}
	}
	delete(c.entries, oldest)
}

// loadState folds agg: from m's cache and the events after it when cached,
// else from the store (snapshot plus tail), filling the cache.
func loadState[S any, C Command](ctx context.Context, store *eventstore.Store, m Machine[S, C], agg events.AggregateID) (eventstore.Loaded[S], error) {
	if m.Cache == nil {
		return eventstore.LoadState(ctx, store, agg, m.Zero, m.Evolve, m.Snapshot)
	}
	key := cacheKey{store: store, agg: agg}
	base, ok := m.Cache.get(key)
	if !ok {
		l, err := eventstore.LoadState(ctx, store, agg, m.Zero, m.Evolve, m.Snapshot)
		if err != nil {
			return l, err
		}
		since := l.Folded
		if m.Snapshot != nil && m.Snapshot.Every > 0 && since >= m.Snapshot.Every {
			since = 0 // LoadState has just written one
		}
		m.Cache.put(key, cacheEntry[S]{state: l.State, version: l.Version, sinceSnapshot: since})
		return l, nil
	}
	h, err := store.LoadAfter(ctx, agg, base.version)
	if err != nil {
		return eventstore.Loaded[S]{}, err
	}
	out := eventstore.Loaded[S]{State: base.state, Version: h.Version, Folded: len(h.Events), SnapshotSeq: base.version}
	for _, p := range h.Parked {
		out.Problems = append(out.Problems, p)
	}
	for _, e := range h.Events {
		next, err := m.Evolve(out.State, e)
		if err != nil {
			out.Problems = append(out.Problems, fmt.Errorf("event seq %d %s: %w", e.Sequence, e.Type(), err))
			continue
		}
		out.State = next
	}
	since := base.sinceSnapshot + len(h.Events)
	if m.Snapshot != nil && m.Snapshot.Every > 0 && since >= m.Snapshot.Every {
		if err := store.SaveSnapshot(ctx, agg, m.Snapshot.Schema, out.Version, out.State); err != nil {
			out.Problems = append(out.Problems, err)
		} else {
			since = 0
		}
	}
	m.Cache.put(key, cacheEntry[S]{state: out.State, version: out.Version, sinceSnapshot: since})
	return out, nil
}

// remember caches the state an Execute produced: the appended events were
// stored right after the version decided on, so it is the fold at version.
func remember[S any, C Command](store *eventstore.Store, m Machine[S, C], agg events.AggregateID, state S, version uint64, appended int) {
	if m.Cache == nil {
		return
	}
	key := cacheKey{store: store, agg: agg}
	since := appended
	if base, ok := m.Cache.get(key); ok {
		since += base.sinceSnapshot
	}
	m.Cache.put(key, cacheEntry[S]{state: state, version: version, sinceSnapshot: since})
}
