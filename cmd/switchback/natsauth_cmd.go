package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/switchback-dev/switchback/natsauth"
	"github.com/switchback-dev/switchback/natsauth/callout"
	"github.com/switchback-dev/switchback/topology"
)

// secretsFile is where nats-auth writes the Secret manifests, next to the
// credential files, for `kubectl apply -f`.
const secretsFile = "secrets.yaml"

// natsAuthCommand generates the per-node NATS authorization of
// docs/nats-authorization.md: the server configuration snippet, the
// credential files (the controller's, the read-only reader's, each
// worker's) and, optionally, the Secrets holding them. It reads and writes
// only a directory of the current user, never through a symbolic link
// (natsauth.CheckDir, natsauth.WriteFile).
func natsAuthCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "nats-auth", Args: noArgs}
	o := &natsAuthOptions{}
	o.addFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := o.validate(); err != nil {
			return err
		}
		return o.run(cmd.OutOrStdout())
	}
	return cmd
}

// natsAuthOptions are `switchback nats-auth`'s flags.
type natsAuthOptions struct {
	nodes                      stringList
	callout, nodeAccounts, sim bool
	keep, perWorker            bool
	out, mode, account         string
	namespace                  string
	maxStore                   int64
	maxConsumers               int
}

func (o *natsAuthOptions) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.callout, "callout", false, "workers get their users from the NATS auth callout the controller serves (each presents its pod's token: the default install); "+
		"writes the callout's keys under "+calloutDir+"/ instead of a user per node")
	fs.Var(&o.nodes, "node", "a node that runs a worker (repeat, or comma-separate), for a user per node instead of --callout; with --callout --node-accounts, the nodes whose accounts the callout places their workers in (none: the controller gives every Node its account)")
	fs.StringVar(&o.out, "out", "", "directory to write "+natsauth.ConfigFile+", "+natsauth.ControllerDir+"/, "+natsauth.ReaderDir+"/ and "+natsauth.WorkersDir+"/ into (yours: refused when owned by another user or a symbolic link)")
	fs.StringVar(&o.mode, "mode", string(natsauth.ModeNKey), "how users authenticate: nkey (the server config holds public keys only) or password (bcrypt hashes)")
	fs.StringVar(&o.account, "account", natsauth.DefaultAccount, "the NATS account Switchback's users (and, with --callout, the workers) are in, bounded by the JetStream limits below; "+
		"empty = the server's global account, where no limit can be set")
	fs.Int64Var(&o.maxStore, "max-store", natsauth.DefaultLimits.MaxStore, "the account's JetStream file storage in bytes, every replica counted (docs/security.md §7)")
	fs.IntVar(&o.maxConsumers, "max-consumers", natsauth.DefaultLimits.MaxConsumers, "the consumers each stream of the account may have: above the cluster's nodes (one each on the command stream)")
	fs.BoolVar(&o.nodeAccounts, "node-accounts", true, "put each worker alone in an account of its own that imports only its node's subjects from --account, and the reader in one that imports only JetStream's read calls, "+
		"so that no reply a worker or the reader redirects reaches JetStream's API or another node (docs/security.md); "+
		"its workers, history and replay take --nats-api-prefix "+strings.TrimSuffix(topology.NodeAPIPrefix, ".")+
		"; false shares --account between every client (the layout before node accounts, open to the redirected replies docs/security.md lists)")
	fs.BoolVar(&o.sim, "sim", false, "let workers use the simulated data plane served on NATS ("+topology.SimSubjects+"): for tests and demos")
	fs.BoolVar(&o.keep, "keep", true, "keep the credentials already under --out (adding a node does not rotate every key); false generates all anew")
	fs.StringVar(&o.namespace, "secrets-namespace", "", "also write "+secretsFile+" with the Secrets of this namespace")
	fs.BoolVar(&o.perWorker, "per-worker-secrets", false, "with --secrets-namespace: one Secret per worker instead of one shared Secret")
}

// validate refuses flags that cannot work together, as usage errors.
func (o *natsAuthOptions) validate() error {
	switch {
	case o.callout && len(o.nodes) > 0 && !o.nodeAccounts:
		return fmt.Errorf("--callout and --node: the callout gives every worker its user, list no node (but with --node-accounts, the nodes whose accounts it places them in): %w", errUsage)
	case !o.callout && len(o.nodes) == 0:
		return fmt.Errorf("--node: at least one node (or --callout): %w", errUsage)
	case o.nodeAccounts && o.account == "":
		return fmt.Errorf("--node-accounts imports from --account, which is empty: name the account, or share the global one with --node-accounts=false: %w", errUsage)
	case o.out == "":
		return fmt.Errorf("--out: a directory is required: %w", errUsage)
	}
	return nil
}

// config is the generator's configuration, with the credentials to keep
// read from --out.
func (o *natsAuthOptions) config() (natsauth.Config, error) {
	cfg := natsauth.Config{Nodes: o.nodes, Mode: natsauth.Mode(o.mode), Account: o.account, NodeAccounts: o.nodeAccounts}
	if o.account != "" {
		cfg.Limits = natsauth.Limits{MaxStore: o.maxStore, MaxConsumers: o.maxConsumers}
	}
	if o.sim {
		cfg.WorkerExtraPublish = []string{topology.SimSubjects}
	}
	if o.keep {
		userNodes := cfg.Nodes
		if o.callout {
			userNodes = nil // the callout's workers have no files
		}
		existing, err := natsauth.ReadFiles(o.out, cfg.Mode, userNodes)
		if err != nil {
			return cfg, fmt.Errorf("--keep: %w", err)
		}
		cfg.Existing = existing
	}
	return cfg, nil
}

// run generates the authorization and writes it under --out: the files, the
// callout's keys with --callout, and secrets.yaml with --secrets-namespace.
func (o *natsAuthOptions) run(stdout io.Writer) error {
	cfg, err := o.config()
	if err != nil {
		return err
	}
	var keys *callout.Keys
	keptKeys := false
	if o.callout {
		if keys, keptKeys, err = calloutKeys(o.out, o.keep); err != nil {
			return err
		}
		keys.Account, keys.NodeAccounts, keys.Layout = cfg.Account, nil, nil
		if cfg.NodeAccounts && len(cfg.Nodes) > 0 {
			keys.NodeAccounts = cfg.Nodes
		}
		if cfg.Callout, err = keys.Server(0); err != nil {
			return err
		}
	}
	auth, err := natsauth.Generate(cfg)
	if err != nil {
		return err
	}
	if keys != nil && cfg.NodeAccounts && len(cfg.Nodes) == 0 {
		// No node listed: the controller renders the node accounts for the
		// Nodes it sees (package nodeaccounts).
		l, err := auth.Layout()
		if err != nil {
			return err
		}
		keys.Layout = &l
	}
	if err := auth.WriteFiles(o.out); err != nil {
		return err
	}
	if keys != nil {
		if err := writeCalloutKeys(o.out, *keys); err != nil {
			return err
		}
	}
	if err := o.writeSecrets(stdout, auth, keys); err != nil {
		return err
	}
	if keys != nil {
		what := "new callout keys"
		if keptKeys {
			what = "the callout keys kept"
		}
		fmt.Fprintf(stdout, "wrote the callout authorization (workers decided by the controller's auth callout; %s), the controller and the reader under %s (%d credential(s) kept)\n", what, o.out, len(cfg.Existing))
	} else {
		fmt.Fprintf(stdout, "wrote the authorization of %d worker(s), the controller and the reader under %s (%d kept)\n", len(o.nodes), o.out, len(cfg.Existing))
	}
	fmt.Fprintf(stdout, "next: add `include %s` to nats.conf and reload the server; see docs/nats-authorization.md\n", natsauth.ConfigFile)
	fmt.Fprintf(stdout, "operators read history with the read-only credential under %s (Secret %s); see \"Reading history as an operator\" there\n",
		filepath.Join(o.out, natsauth.ReaderDir), natsauth.ReaderSecretName)
	return nil
}

// writeSecrets writes secrets.yaml with --secrets-namespace, and removes an
// earlier run's without it: it would no longer match the files.
func (o *natsAuthOptions) writeSecrets(stdout io.Writer, auth *natsauth.Authorization, keys *callout.Keys) error {
	secrets := filepath.Join(o.out, secretsFile)
	if o.namespace == "" {
		if err := os.Remove(secrets); err == nil {
			fmt.Fprintf(stdout, "removed the outdated %s (give --secrets-namespace to write it anew)\n", secrets)
		} else if !errors.Is(err, iofs.ErrNotExist) {
			return err
		}
		return nil
	}
	layout := natsauth.SharedSecret
	if o.perWorker {
		layout = natsauth.SecretPerWorker
	}
	manifests := auth.Secrets(o.namespace, layout)
	if keys != nil {
		data, err := keys.SecretData()
		if err != nil {
			return err
		}
		manifests = append(manifests, &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, Type: corev1.SecretTypeOpaque,
			ObjectMeta: metav1.ObjectMeta{Name: callout.SecretName, Namespace: o.namespace,
				Labels: map[string]string{"app.kubernetes.io/name": "switchback", "app.kubernetes.io/component": "controller"}},
			Data: data})
	}
	var b bytes.Buffer
	for _, s := range manifests {
		y, err := yaml.Marshal(s)
		if err != nil {
			return fmt.Errorf("secret %s: %w", s.Name, err)
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	return natsauth.WriteFile(secrets, b.Bytes(), 0o600)
}

// calloutDir is where nats-auth --callout keeps the callout's keys, the
// files of the callout.SecretName Secret.
const calloutDir = "callout"

// calloutKeys are the keys under out/callout when keep finds them all (read
// as the credentials are: a directory of the current user, no symbolic link
// followed), else fresh ones; kept says which. None rotates alone (the
// issuer signs every worker's user, the service key is in the servers'
// configuration), so some of them only is an error, not a silent rotation.
func calloutKeys(out string, keep bool) (keys *callout.Keys, kept bool, err error) {
	dir := filepath.Join(out, calloutDir)
	// Checked before anything is written: the keys go there in the end.
	if err := natsauth.CheckDir(dir); err != nil {
		return nil, false, err
	}
	if keep {
		data := map[string][]byte{}
		var missing []string
		for _, name := range callout.KeyFiles {
			b, err := natsauth.ReadFile(filepath.Join(dir, name))
			switch {
			case errors.Is(err, iofs.ErrNotExist):
				missing = append(missing, name)
			case err != nil:
				return nil, false, fmt.Errorf("--keep: %w", err)
			default:
				data[name] = b
			}
		}
		switch {
		case len(missing) == 0:
			k, err := callout.KeysFromData(data)
			if err != nil {
				return nil, false, fmt.Errorf("--keep: %s: %w", dir, err)
			}
			return &k, true, nil
		case len(data) > 0:
			return nil, false, fmt.Errorf("--keep: %s holds only some of the callout's keys (missing %s): restore them, or remove the directory to rotate all three (every worker then reconnects under the new issuer)",
				dir, strings.Join(missing, ", "))
		}
	}
	k, err := callout.GenerateKeys()
	if err != nil {
		return nil, false, err
	}
	return &k, false, nil
}

// writeCalloutKeys writes k's seeds under out/callout, as WriteFiles writes
// the users' (a private directory, no symbolic link followed).
func writeCalloutKeys(out string, k callout.Keys) error {
	data, err := k.SecretData()
	if err != nil {
		return err
	}
	dir := filepath.Join(out, calloutDir)
	// A file of an earlier run would place the workers as it said.
	for name, absent := range map[string]bool{callout.AccountKey: k.Account == "", callout.NodeAccountsKey: k.NodeAccounts == nil, callout.LayoutKey: k.Layout == nil} {
		if !absent {
			continue
		}
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, iofs.ErrNotExist) {
			return err
		}
	}
	return natsauth.WritePrivate(dir, data)
}
