// Package longhorntest puts Longhorn's API on the test apiserver (package
// testenv): the CRDs of test/longhorn-crds, written from Longhorn v1.12.1's,
// and a dynamic client to create Longhorn's objects with.
package longhorntest

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/switchback-dev/switchback/test/harness/testenv"
)

// InstallCRDs installs the CRDs of test/longhorn-crds on the apiserver of
// cfg.
func InstallCRDs(ctx context.Context, cfg *rest.Config) error {
	root, err := testenv.RepoRoot()
	if err != nil {
		return fmt.Errorf("longhorn CRDs: %w", err)
	}
	return testenv.InstallCRDs(ctx, cfg, filepath.Join(root, "test", "longhorn-crds"))
}

// Dynamic is a dynamic client of the apiserver of cfg that drops the
// apiserver's warnings: Longhorn's finalizer "longhorn.io" draws one on
// every write of an object carrying it, as on a real cluster.
func Dynamic(t testing.TB, cfg *rest.Config) dynamic.Interface {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = rest.NoWarnings{}
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	return dyn
}
