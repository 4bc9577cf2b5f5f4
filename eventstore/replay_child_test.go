package eventstore_test

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/replay"
)

// Environment of TestReplayChild: the server to replay from and how many
// events its stream REPLAY holds.
const (
	replayChildURL    = "REPLAY_CHILD_URL"
	replayChildEvents = "REPLAY_CHILD_EVENTS"
)

// replayPeakMarker precedes the child's VmHWM in its output. The child
// reports it itself: the kernel's ru_maxrss for a child counts the memory
// it shared with this process until its exec.
const replayPeakMarker = "replay-peak-rss-MiB: "

// replayPeakRSS runs TestReplayChild in a child process (this test binary)
// on the server at url, whose stream holds n events, and returns the
// child's peak resident set in MiB.
func replayPeakRSS(b *testing.B, url string, n int) float64 {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestReplayChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), replayChildURL+"="+url, replayChildEvents+"="+strconv.Itoa(n))
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("replay in a child process: %v\n%s", err, out)
	}
	for line := range strings.Lines(string(out)) {
		if _, v, ok := strings.Cut(line, replayPeakMarker); ok {
			mib, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				b.Fatalf("child's peak %q: %v", v, err)
			}
			return mib
		}
	}
	b.Fatalf("the child process reported no peak:\n%s", out)
	return 0
}

// TestReplayChild is BenchmarkReplay1M's child process (replayPeakRSS): it
// replays the stream with replay.Run, as `switchback replay` does, so that
// its peak resident set is the replay's alone. Without REPLAY_CHILD_URL it
// skips.
func TestReplayChild(t *testing.T) {
	url := os.Getenv(replayChildURL)
	if url == "" {
		t.Skip("BenchmarkReplay1M's child process")
	}
	want, err := strconv.ParseUint(os.Getenv(replayChildEvents), 10, 64)
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
	res, err := replay.Run(ctx, s, replay.Options{})
	require.NoError(t, err)
	require.Equal(t, want, res.LastSequence)
	require.Empty(t, res.Missing)
	require.Empty(t, res.Parked)
	require.NotEmpty(t, res.Upgrades)
	t.Logf("%s%.1f", replayPeakMarker, peakRSSMiB())
}
