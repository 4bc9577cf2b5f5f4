package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nkeys"
	"sigs.k8s.io/yaml"

	"github.com/switchback-dev/switchback/natsauth"
)

// secretsFile is where nats-auth writes the Secret manifests, next to the
// credential files, for `kubectl apply -f`.
const secretsFile = "secrets.yaml"

// runNATSAuth generates the per-node NATS authorization of
// docs/nats-authorization.md: the server configuration snippet, the
// credential files and, optionally, the Secrets holding them.
func runNATSAuth(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("nats-auth", "nats-auth --node NAME [--node NAME ...] --out DIR [--mode nkey|password] [--account NAME] [--secrets-namespace NS]", stderr)
	var nodes stringList
	fs.Var(&nodes, "node", "a node that runs a worker (repeat, or comma-separate)")
	out := fs.String("out", "", "directory to write "+natsauth.ConfigFile+", "+natsauth.ControllerDir+"/ and "+natsauth.WorkersDir+"/ into")
	mode := fs.String("mode", string(natsauth.ModeNKey), "how users authenticate: nkey (the server config holds public keys only) or password (bcrypt hashes)")
	account := fs.String("account", "", "put Switchback's users in this NATS account (empty = the server's global account)")
	sim := fs.Bool("sim", false, "let workers use the simulated data plane served on NATS ("+natsauth.SimDataPlaneSubjects+"): for tests and demos")
	keep := fs.Bool("keep", true, "keep the credentials already under --out (adding a node does not rotate every key); false generates all anew")
	namespace := fs.String("secrets-namespace", "", "also write "+secretsFile+" with the Secrets of this namespace")
	perWorker := fs.Bool("per-worker-secrets", false, "with --secrets-namespace: one Secret per worker instead of one shared Secret")
	if err := parse(fs, args); err != nil {
		return err
	}
	switch {
	case len(nodes) == 0:
		return fmt.Errorf("--node: at least one node: %w", errUsage)
	case *out == "":
		return fmt.Errorf("--out: a directory is required: %w", errUsage)
	}
	cfg := natsauth.Config{Nodes: nodes, Mode: natsauth.Mode(*mode), Account: *account}
	if *sim {
		cfg.WorkerExtraPublish = []string{natsauth.SimDataPlaneSubjects}
	}
	if *keep {
		existing, err := readCredentials(*out, cfg)
		if err != nil {
			return err
		}
		cfg.Existing = existing
	}
	auth, err := natsauth.Generate(cfg)
	if err != nil {
		return err
	}
	if err := auth.WriteFiles(*out); err != nil {
		return err
	}
	secrets := filepath.Join(*out, secretsFile)
	if *namespace == "" {
		// A secrets.yaml from an earlier run no longer matches the files.
		if err := os.Remove(secrets); err == nil {
			fmt.Fprintf(stdout, "removed the outdated %s (give --secrets-namespace to write it anew)\n", secrets)
		} else if !errors.Is(err, iofs.ErrNotExist) {
			return err
		}
	} else {
		layout := natsauth.SharedSecret
		if *perWorker {
			layout = natsauth.SecretPerWorker
		}
		var b bytes.Buffer
		for _, s := range auth.Secrets(*namespace, layout) {
			y, err := yaml.Marshal(s)
			if err != nil {
				return fmt.Errorf("secret %s: %w", s.Name, err)
			}
			b.WriteString("---\n")
			b.Write(y)
		}
		if err := os.WriteFile(secrets, b.Bytes(), 0o600); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "wrote the authorization of %d worker(s) and the controller under %s (%d kept)\n", len(nodes), *out, len(cfg.Existing))
	fmt.Fprintf(stdout, "next: add `include %s` to nats.conf and reload the server; see docs/nats-authorization.md\n", natsauth.ConfigFile)
	return nil
}

// readCredentials reads the credentials a previous run wrote under dir, so
// a regeneration keeps them: seeds (nkey mode) or passwords, by node, the
// controller's under "". A missing directory or file is simply not kept; an
// unreadable or malformed one is an error, since silently rotating a key
// would lock out the worker using it.
func readCredentials(dir string, cfg natsauth.Config) (map[string]natsauth.Credential, error) {
	probe, err := natsauth.Generate(natsauth.Config{Nodes: cfg.Nodes, Mode: cfg.Mode, Account: cfg.Account, BcryptCost: 4})
	if err != nil {
		return nil, err
	}
	out := map[string]natsauth.Credential{}
	read := func(who, path string) error {
		b, err := os.ReadFile(path)
		if errors.Is(err, iofs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if probe.Mode() == natsauth.ModePassword {
			out[who] = natsauth.Credential{Password: strings.TrimSpace(string(b))}
			return nil
		}
		kp, err := nkeys.ParseDecoratedNKey(b)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		pub, err := kp.PublicKey()
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		seed, err := kp.Seed()
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		out[who] = natsauth.Credential{NKey: pub, Seed: seed}
		return nil
	}
	controller := filepath.Join(dir, natsauth.ControllerDir, "controller.nk")
	if probe.Mode() == natsauth.ModePassword {
		controller = filepath.Join(dir, natsauth.ControllerDir, "password")
	}
	if err := read("", controller); err != nil {
		return nil, fmt.Errorf("--keep: %w", err)
	}
	for _, n := range cfg.Nodes {
		if err := read(n, filepath.Join(dir, natsauth.WorkersDir, probe.SecretKey(n))); err != nil {
			return nil, fmt.Errorf("--keep: node %s: %w", n, err)
		}
	}
	return out, nil
}
