package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/switchback-dev/switchback/natsauth"
	"github.com/switchback-dev/switchback/testenv"
)

// deploy/nats-auth: what `switchback nats-auth` writes, applied the way its
// kustomization says, is accepted by the apiserver, and the NATS servers'
// configuration with the generated users is one nats-server loads.
func TestNATSAuthComponent(t *testing.T) {
	env := testenv.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ensureNamespace(t, ctx, env)
	root, err := testenv.RepoRoot()
	require.NoError(t, err)

	// The component's nats.conf is the base's plus the include.
	base, comp := natsConf(t, filepath.Join(root, "deploy/nats/config.yaml")), natsConf(t, filepath.Join(root, "deploy/nats-auth/nats-config.yaml"))
	assert.Equal(t, base+"include "+natsauth.ConfigFile+"\n", comp, "deploy/nats-auth/nats-config.yaml drifted from deploy/nats/config.yaml")

	dir := t.TempDir()
	code, out, errOut := runCmd(t, time.Minute, "nats-auth", "--node", "node-1,node-2.example.com", "--out", filepath.Join(dir, "auth"),
		"--secrets-namespace", "longhorn-system")
	require.Equal(t, 0, code, "%s\n%s", out, errOut)

	// nats-server loads nats.conf with the generated users beside it.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "auth", "nats.conf"), []byte(comp), 0o600))
	t.Setenv("POD_NAME", "switchback-nats-0")
	var o server.Options
	require.NoError(t, o.ProcessConfigFile(filepath.Join(dir, "auth", "nats.conf")))
	assert.Len(t, o.Nkeys, 3, "the controller and two workers")

	_, stderr, err := env.Kubectl(ctx, nil, "apply", "--dry-run=server", "-f", filepath.Join(dir, "auth", secretsFile))
	require.NoError(t, err, stderr)
	_, stderr, err = env.Kubectl(ctx, nil, "-n", "longhorn-system", "create", "configmap", "switchback-nats-auth", "--dry-run=server",
		"--from-file="+filepath.Join(dir, "auth", natsauth.ConfigFile))
	require.NoError(t, err, stderr)

	rel, err := filepath.Rel(dir, root)
	require.NoError(t, err)
	overlay := "resources: [" + filepath.Join(rel, "deploy") + "]\ncomponents: [" + filepath.Join(rel, "deploy/nats-auth") + "]\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o600))
	out, stderr, err = env.Kubectl(ctx, nil, "apply", "--dry-run=server", "-o", "yaml", "-k", dir)
	require.NoError(t, err, "%s\n%s", out, stderr)
	for _, want := range []string{
		"--nats-nkey=/etc/switchback/nats/controller.nk",
		"--nats-nkey=/etc/switchback/nats/$(NODE_NAME).nk",
		"secretName: switchback-nats-workers",
		"name: switchback-nats-auth",
	} {
		assert.Contains(t, out, want)
	}
}

// natsConf returns the nats.conf of a ConfigMap manifest.
func natsConf(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var cm struct {
		Data map[string]string `json:"data"`
	}
	require.NoError(t, yaml.Unmarshal(b, &cm))
	require.Contains(t, cm.Data, "nats.conf", path)
	return strings.TrimLeft(cm.Data["nats.conf"], "\n")
}
