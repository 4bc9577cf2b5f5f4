package main

import (
	"context"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/kubeclient"
	"github.com/switchback-dev/switchback/test/harness/syncbuf"
	"github.com/switchback-dev/switchback/test/harness/testenv"
)

// TestDemoEndsWhenTheClusterDoes: `demo --kubeconfig` returns once the
// real apiserver shows the end: a completed upgrade leaves the manager
// completed and every NodeDataEngineUpgrade completed (not a node left at
// switching-back); a manager deleted mid-upgrade is cancelled and gone (its
// finalizer removed), not left behind.
func TestDemoEndsWhenTheClusterDoes(t *testing.T) {
	env := testenv.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ensureNamespace(t, ctx, env)
	kc, err := kubeclient.New(env.Config)
	require.NoError(t, err)
	managers := kc.Managers(demoNamespace)
	// No controller runs once the demo has returned: let go of what it
	// leaves for the tests after this one.
	cleanup := func() {
		m, err := managers.Get(context.Background(), demoName)
		if err == nil {
			m.Finalizers = nil
			_, _ = managers.Update(context.Background(), m)
			_ = managers.Delete(context.Background(), demoName, metav1.DeleteOptions{})
		}
		list, err := kc.NodeUpgrades(demoNamespace).List(context.Background(), metav1.ListOptions{})
		if err == nil {
			for _, n := range list.Items {
				_ = kc.NodeUpgrades(demoNamespace).Delete(context.Background(), n.Name, metav1.DeleteOptions{})
			}
		}
	}
	t.Cleanup(cleanup)

	t.Run("completed", func(t *testing.T) {
		code, out, errOut := runCmd(t, 2*time.Minute, "demo", "--nodes", "3", "--volumes", "6", "--latency", "5ms",
			"--kubeconfig", env.Kubeconfig, "--data-dir", t.TempDir())
		require.Equal(t, 0, code, "%s\n%s", out, errOut)
		m, err := managers.Get(ctx, demoName)
		require.NoError(t, err)
		assert.Equal(t, v1beta2.UpgradeStateCompleted, m.Status.State)
		nodes, err := kc.NodeUpgrades(demoNamespace).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		require.NotEmpty(t, nodes.Items)
		for _, n := range nodes.Items {
			assert.Equal(t, v1beta2.NodeUpgradeStateCompleted, n.Status.State, n.Name)
		}
		// The README's wait: it returns once the upgrade ended, whichever
		// way (Progressing turns False on completed, error and cancelled).
		_, stderr, err := env.Kubectl(ctx, nil, "-n", demoNamespace, "wait", "--for=condition=Progressing=false", "lhum/"+demoName, "--timeout=30s")
		require.NoError(t, err, stderr)
		state, stderr, err := env.Kubectl(ctx, nil, "-n", demoNamespace, "get", "lhum", demoName, "-o", "jsonpath={.status.state}")
		require.NoError(t, err, stderr)
		assert.Equal(t, "completed", state)
		cleanup()
	})

	t.Run("deleted mid-upgrade", func(t *testing.T) {
		done := make(chan int, 1)
		var out syncbuf.Buffer
		go func() {
			done <- run(ctx, "switchback", []string{"demo", "--nodes", "3", "--volumes", "6", "--latency", "5ms", "--stuck-volume", "--stall-after", "200ms",
				"--kubeconfig", env.Kubeconfig, "--data-dir", t.TempDir()}, &out, io.Discard)
		}()
		require.Eventually(t, func() bool {
			m, err := managers.Get(ctx, demoName)
			return err == nil && m.Status.State == v1beta2.UpgradeStateUpgrading && slices.Contains(m.Finalizers, v1beta2.CancelFinalizer)
		}, time.Minute, 20*time.Millisecond, "the demo's upgrade in flight")
		require.NoError(t, managers.Delete(ctx, demoName, metav1.DeleteOptions{}))
		select {
		case code := <-done:
			assert.Equal(t, 1, code, "the upgrade ended cancelled:\n%s", out.String())
		case <-ctx.Done():
			t.Fatal("the demo did not end")
		}
		assert.Contains(t, out.String(), "cancelled")
		_, err := managers.Get(ctx, demoName)
		assert.True(t, apierrors.IsNotFound(err), "the cancelled manager is gone, not stuck behind its finalizer: %v", err)
	})
}

// TestDemoKeepRunning: with --keep-running the demo's NATS keeps serving
// after the end, so the replay command it prints works, until interrupted.
func TestDemoKeepRunning(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncbuf.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, "switchback", []string{"demo", "--nodes", "2", "--volumes", "3", "--latency", "5ms", "--keep-running", "--data-dir", t.TempDir()}, &out, io.Discard)
	}()
	re := regexp.MustCompile(`switchback replay --nats-url (\S+)`)
	var url string
	require.Eventually(t, func() bool {
		if !strings.Contains(out.String(), "NATS keeps serving") {
			return false
		}
		m := re.FindStringSubmatch(out.String())
		if m != nil {
			url = m[1]
		}
		return url != ""
	}, 2*time.Minute, 20*time.Millisecond, "the demo ended and keeps NATS serving")
	code, replayed, errOut := runCmd(t, 30*time.Second, "replay", "--nats-url", url)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, replayed, "completed")
	select {
	case code := <-done:
		t.Fatalf("the demo returned (%d) before it was interrupted", code)
	default:
	}
	cancel()
	assert.Equal(t, 0, <-done, "interrupted after a completed upgrade: success")
}
