package eventstore_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/replay"
)

// Environment of TestReplayChild: the server to replay from, how many
// events its stream REPLAY holds, and what to measure.
const (
	replayChildURL    = "REPLAY_CHILD_URL"
	replayChildEvents = "REPLAY_CHILD_EVENTS"
	replayChildMode   = "REPLAY_CHILD_MODE"
)

// What TestReplayChild measures: its peak resident set replaying (nothing
// else done first), or the replay's time and a raw read's.
const (
	childPeak  = "peak"
	childTimed = "timed"
)

// timedRounds is how many rounds of a raw read and a replay a timed child
// makes: enough that one odd round does not decide the median.
const timedRounds = 5

// The child's figures in its output, each after its marker. The child
// reports its VmHWM itself: the kernel's ru_maxrss for a child counts the
// memory it shared with this process until its exec.
const (
	replayPeakMarker  = "replay-peak-rss-MiB: "
	foldSecondsMarker = "fold-seconds: "
	rawSecondsMarker  = "raw-seconds: "
	ratioMarker       = "raw-over-fold: "
)

// replayChild runs TestReplayChild in a child process (this test binary)
// on the server at url, whose stream holds n events, and returns the
// figures it printed, by marker.
func replayChild(b *testing.B, url string, n int, mode string) map[string]float64 {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestReplayChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), replayChildURL+"="+url, replayChildEvents+"="+strconv.Itoa(n), replayChildMode+"="+mode)
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("replay in a child process: %v\n%s", err, out)
	}
	figures := map[string]float64{}
	for line := range strings.Lines(string(out)) {
		for _, marker := range []string{replayPeakMarker, foldSecondsMarker, rawSecondsMarker, ratioMarker} {
			if _, v, ok := strings.Cut(line, marker); ok {
				f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err != nil {
					b.Fatalf("child's %s%q: %v", marker, v, err)
				}
				figures[marker] = f
			}
		}
	}
	if len(figures) == 0 {
		b.Fatalf("the child process reported nothing:\n%s", out)
	}
	return figures
}

// TestReplayChild is BenchmarkReplay1M's child process (replayChild): it
// replays the stream as `switchback replay` does (replay.Stream printing
// each upgrade with a replay.TableWriter) and reports its peak resident
// set, or times that replay against raw reads of the stream. Without
// REPLAY_CHILD_URL it skips.
func TestReplayChild(t *testing.T) {
	url := os.Getenv(replayChildURL)
	if url == "" {
		t.Skip("BenchmarkReplay1M's child process")
	}
	n, err := strconv.Atoi(os.Getenv(replayChildEvents))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	nc, err := nats.Connect(url)
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	s, err := eventstore.Open(ctx, js, eventstore.Config{Stream: "REPLAY"})
	require.NoError(t, err)

	timed := os.Getenv(replayChildMode) == childTimed
	replayOnce := func() time.Duration {
		start := time.Now()
		table := replay.NewTableWriter(io.Discard)
		upgrades, unfinished := 0, 0
		res, err := replay.Stream(ctx, s, replay.Options{}, func(u *replay.Upgrade) error {
			upgrades++
			if len(u.Refused) > 0 {
				return fmt.Errorf("upgrade %s: the fold refused %d event(s), the first: %w", u.Ref, len(u.Refused), u.Refused[0])
			}
			if u.Manager.State != events.ManagerCompleted {
				unfinished++
			}
			return table.Add(u)
		})
		require.NoError(t, err)
		require.NoError(t, table.Close(res))
		took := time.Since(start)
		require.Equal(t, uint64(n), res.LastSequence)
		require.Empty(t, res.Missing)
		require.Empty(t, res.Parked)
		require.Zero(t, res.Late)
		require.NotZero(t, upgrades)
		// The benchmark's fills end where their size does, cutting an
		// upgrade short: the quarter's and the whole's.
		require.LessOrEqual(t, unfinished, 2, "every upgrade of the stream but the ones cut short completes")
		return took
	}
	if !timed {
		replayOnce()
		t.Logf("%s%.1f", replayPeakMarker, peakRSSMiB())
		return
	}
	rawOnce := func() time.Duration {
		start := time.Now()
		readOrdered(t, js, n, func(jetstream.Msg) {})
		return time.Since(start)
	}
	// Raw read and replay in turn, timedRounds times, the first of a round
	// alternating; the ratio is the median of the rounds' (a round's two
	// passes see the same machine: a 2-core virtual machine's other work
	// and its neighbours' fall on one round or another), the times the
	// medians of each kind. The fastest pass of each kind would compare
	// the odd fast pass of one (a raw read at 1M events can take 2.5 s
	// where its others take 3.5-4.1) with the other's steady ones. The
	// first read after a fill, which finds the blocks the fill just wrote
	// in the server's cache, is not timed.
	rawOnce()
	var raws, folds, ratios []float64
	for i := range timedRounds {
		var r, f time.Duration
		if i%2 == 0 {
			r, f = rawOnce(), replayOnce()
		} else {
			f, r = replayOnce(), rawOnce()
		}
		raws, folds = append(raws, r.Seconds()), append(folds, f.Seconds())
		ratios = append(ratios, r.Seconds()/f.Seconds())
	}
	t.Logf("%s%.3f", foldSecondsMarker, median(folds))
	t.Logf("%s%.3f", rawSecondsMarker, median(raws))
	t.Logf("%s%.4f", ratioMarker, median(ratios))
}

// median is the middle of vs (an odd number of them).
func median(vs []float64) float64 {
	s := slices.Sorted(slices.Values(vs))
	return s[len(s)/2]
}
