package orchestrator

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/commands"
	"github.com/switchback-dev/switchback/commands/intake"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/natsembed/natstest"
	"github.com/switchback-dev/switchback/topology"
)

// activeHistory is a stream of managers for the snapshot tests, and ways to
// extend it.
type activeHistory struct {
	t     *testing.T
	ctx   context.Context
	store *eventstore.Store
	kv    jetstream.KeyValue
	x     *commands.Executor
}

var activeAt = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func newActiveHistory(t *testing.T) *activeHistory {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	_, js := natstest.Connect(t, natstest.Start(t))
	store, err := eventstore.Open(ctx, js, eventstore.Config{})
	require.NoError(t, err)
	kv, err := js.KeyValue(ctx, topology.SnapshotBucket)
	require.NoError(t, err)
	x := commands.New(commands.Config{Store: store, Source: events.SourceIntake, Now: func() time.Time { return activeAt }})
	return &activeHistory{t: t, ctx: ctx, store: store, kv: kv, x: x}
}

func activeRef(name string) events.ManagerRef {
	return events.ManagerRef{Namespace: "longhorn-system", Name: name, UID: "uid-" + name}
}

func (h *activeHistory) request(names ...string) {
	for _, name := range names {
		_, err := intake.RequestUpgrade(h.ctx, h.x, activeRef(name), 1, v1beta2.DataEngineUpgradeManagerSpec{DataEngine: v1beta2.DataEngineTypeV2})
		require.NoError(h.t, err)
	}
}

// append writes e on name's manager subject after its last event, whether
// or not its fold accepts it (a faulty writer's event included).
func (h *activeHistory) append(name string, e events.Event) {
	agg := events.ManagerAggregate(activeRef(name))
	l, err := h.store.Load(h.ctx, agg)
	require.NoError(h.t, err)
	_, err = h.store.Append(h.ctx, agg, l.Version, events.New(agg, events.SourceController, "test-"+name, activeAt, e)...)
	require.NoError(h.t, err)
}

func (h *activeHistory) fail(names ...string) {
	for _, name := range names {
		h.append(name, events.UpgradeFailed{Reason: "Test", Message: "ended by the test"})
	}
}

// model is what a read model answers and holds once up to date.
type activeView struct {
	Active []string
	Held   []events.ManagerRef
	State  string // the open managers, as a snapshot stores them
}

func (h *activeHistory) view(a *activeUpgrades) activeView {
	active, err := a.except(h.ctx, events.ManagerRef{})
	require.NoError(h.t, err)
	held, err := a.held(h.ctx)
	require.NoError(h.t, err)
	st, err := json.Marshal(a.state())
	require.NoError(h.t, err)
	return activeView{Active: active, Held: held, State: string(st)}
}

// rewriteSnapshot changes fields of the stored snapshot, as a foreign or
// damaged writer would.
func (h *activeHistory) rewriteSnapshot(change func(map[string]any)) {
	key := eventstore.ModelSnapshotKey(activeSnapshotName)
	e, err := h.kv.Get(h.ctx, key)
	require.NoError(h.t, err)
	var snap map[string]any
	require.NoError(h.t, json.Unmarshal(e.Value(), &snap))
	change(snap)
	b, err := json.Marshal(snap)
	require.NoError(h.t, err)
	_, err = h.kv.Put(h.ctx, key, b)
	require.NoError(h.t, err)
}

// A restart from the read model's snapshot answers as a fold of the whole
// stream does, reading only what the snapshot does not cover; a snapshot
// that cannot be trusted is ignored, and the whole stream folded.
func TestActiveSnapshotGivesTheFullFold(t *testing.T) {
	cases := []struct {
		name string
		// after runs once the previous process saved its snapshot (a few
		// managers ended, others in progress).
		after func(h *activeHistory)
		// fromSnapshot: the restart starts from the snapshot; tail is how
		// many events it then folds.
		fromSnapshot bool
		tail         int
	}{
		{name: "snapshot at the stream's end", after: func(*activeHistory) {}, fromSnapshot: true},
		{name: "snapshot behind: the tail is folded", fromSnapshot: true, tail: 4,
			after: func(h *activeHistory) {
				h.request("e") // new since the snapshot
				h.fail("c")    // in progress at the snapshot, ended since
				h.request("f") // new, and ended since
				h.fail("f")
				// A faulty writer's opener on a manager ended before the
				// snapshot: its fold refuses it.
				ref := activeRef("done")
				h.append("done", events.UpgradeRequested{Namespace: ref.Namespace, Name: ref.Name, UID: ref.UID, Generation: 2, DataEngine: "v2"})
			}},
		{name: "corrupt value", after: func(h *activeHistory) {
			_, err := h.kv.Put(h.ctx, eventstore.ModelSnapshotKey(activeSnapshotName), []byte("{not json"))
			require.NoError(t, err)
		}},
		{name: "another schema", after: func(h *activeHistory) {
			h.rewriteSnapshot(func(s map[string]any) { s["schema"], s["state"] = "active/v0", map[string]any{} })
		}},
		{name: "another stream", after: func(h *activeHistory) {
			h.rewriteSnapshot(func(s map[string]any) { s["stream"], s["state"] = "OTHER", map[string]any{} })
		}},
		{name: "another incarnation of the stream", after: func(h *activeHistory) {
			h.rewriteSnapshot(func(s map[string]any) { s["created"], s["state"] = "2001-01-01T00:00:00Z", map[string]any{} })
		}},
		{name: "past the stream's end", after: func(h *activeHistory) {
			h.rewriteSnapshot(func(s map[string]any) { s["seq"], s["state"] = 1<<40, map[string]any{} })
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newActiveHistory(t)
			h.request("a", "b", "c", "d", "done")
			h.fail("b", "done")
			previous := &activeUpgrades{store: h.store}
			require.NoError(t, previous.warm(h.ctx))
			require.Equal(t, 7, previous.folded)
			tc.after(h)

			restarted := &activeUpgrades{store: h.store}
			got := h.view(restarted)
			// The reference: a fold of the whole stream, no snapshot.
			require.NoError(t, h.kv.Delete(h.ctx, eventstore.ModelSnapshotKey(activeSnapshotName)))
			full := &activeUpgrades{store: h.store}
			want := h.view(full)
			require.Zero(t, full.snapSeq)

			assert.Equal(t, want, got)
			assert.NotEmpty(t, want.Active)
			if tc.fromSnapshot {
				assert.NotZero(t, restarted.snapSeq, "started from the snapshot")
				assert.Equal(t, tc.tail, restarted.folded, "folded only the tail")
			} else {
				assert.Zero(t, restarted.snapSeq, "the snapshot was ignored")
				assert.Equal(t, full.folded, restarted.folded, "folded the whole stream")
			}
		})
	}
}
