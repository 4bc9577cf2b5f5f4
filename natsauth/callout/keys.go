package callout

import (
	"bytes"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/switchback-dev/switchback/natsauth"
)

// SecretName is the Secret holding Keys (SecretData), mounted into the
// controller only: whoever holds the issuer seed can mint any user.
const SecretName = "switchback-nats-callout"

// Keys of the SecretName Secret.
const (
	IssuerKey  = "issuer.nk"
	XKeyKey    = "xkey.nk"
	ServiceKey = "callout.nk"
	// AccountKey names the account the workers are placed in; absent (a
	// Secret written before accounts) is the global account.
	AccountKey = "account"
	// NodeAccountsKey lists, one per line, the nodes whose accounts the
	// server's configuration holds (Keys.NodeAccounts); absent without
	// the node-account layout.
	NodeAccountsKey = "node-accounts"
	// LayoutKey holds the layout the controller renders the servers'
	// configuration from for the nodes it sees (natsauth.Layout, JSON):
	// present when nats-auth was given no node (the node accounts follow
	// the cluster's Nodes, package nodeaccounts).
	LayoutKey = "layout.json"
)

// Keys are the callout's secrets: the issuer that signs every worker user,
// the xkey that encrypts the requests, and the service user's own seed;
// and the account the workers go to, which travels with them so that the
// generator and the controller can never disagree on it.
type Keys struct {
	Issuer  nkeys.KeyPair
	XKey    nkeys.KeyPair
	Service nkeys.KeyPair
	// Account is Config.Account: natsauth.Config.Account of the same run.
	Account string
	// NodeAccounts is Config.NodeAccounts: the nodes of natsauth.Config's
	// NodeAccounts layout of the same run; nil without it.
	NodeAccounts []string
	// Layout, when set, renders the servers' configuration for the
	// cluster's nodes: the node accounts follow them (NodeAccounts is then
	// nil).
	Layout *natsauth.Layout
}

// GenerateKeys creates fresh keys.
func GenerateKeys() (Keys, error) {
	var k Keys
	var err error
	if k.Issuer, err = nkeys.CreateAccount(); err != nil {
		return Keys{}, fmt.Errorf("callout: create the issuer key: %w", err)
	}
	if k.XKey, err = nkeys.CreateCurveKeys(); err != nil {
		return Keys{}, fmt.Errorf("callout: create the xkey: %w", err)
	}
	if k.Service, err = nkeys.CreateUser(); err != nil {
		return Keys{}, fmt.Errorf("callout: create the service user key: %w", err)
	}
	return k, nil
}

// SecretData returns the seeds as the data of the SecretName Secret, each
// a seed file as ParseSeed (and --nats-nkey, for ServiceKey) reads it.
func (k Keys) SecretData() (map[string][]byte, error) {
	out := map[string][]byte{}
	for name, kp := range map[string]nkeys.KeyPair{IssuerKey: k.Issuer, XKeyKey: k.XKey, ServiceKey: k.Service} {
		seed, err := kp.Seed()
		if err != nil {
			return nil, fmt.Errorf("callout: %s: %w", name, err)
		}
		out[name] = append(seed, '\n')
	}
	if k.Account != "" {
		out[AccountKey] = []byte(k.Account + "\n")
	}
	if k.NodeAccounts != nil {
		out[NodeAccountsKey] = []byte(strings.Join(k.NodeAccounts, "\n") + "\n")
	}
	if k.Layout != nil {
		b, err := natsauth.MarshalLayout(*k.Layout)
		if err != nil {
			return nil, fmt.Errorf("callout: %w", err)
		}
		out[LayoutKey] = b
	}
	return out, nil
}

// ServiceCredential is the service user's credential (natsauth.Callout.Service).
func (k Keys) ServiceCredential() (natsauth.Credential, error) {
	pub, err := k.Service.PublicKey()
	if err != nil {
		return natsauth.Credential{}, fmt.Errorf("callout: service user key: %w", err)
	}
	return natsauth.Credential{User: natsauth.CalloutServiceUser, NKey: pub}, nil
}

// Server is the server side of these keys, their public halves, for
// natsauth.Config.Callout; timeout is the server's authorization timeout
// (zero keeps the server's; keep it above Config.ReviewTimeout).
func (k Keys) Server(timeout time.Duration) (*natsauth.Callout, error) {
	issuer, err := k.Issuer.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("callout: issuer key: %w", err)
	}
	xkey, err := k.XKey.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("callout: xkey: %w", err)
	}
	svc, err := k.ServiceCredential()
	if err != nil {
		return nil, err
	}
	return &natsauth.Callout{Issuer: issuer, XKey: xkey, Service: svc, Timeout: timeout}, nil
}

// ParseSeed reads a seed file's content and checks its kind
// (nkeys.PrefixByteAccount for the issuer, nkeys.PrefixByteCurve for the
// xkey, nkeys.PrefixByteUser for the service user), so that a swapped
// file is a clear error rather than a server refusing every worker.
func ParseSeed(data []byte, want nkeys.PrefixByte) (nkeys.KeyPair, error) {
	seed := bytes.TrimSpace(data)
	prefix, _, err := nkeys.DecodeSeed(seed)
	if err != nil {
		return nil, fmt.Errorf("callout: not an nkey seed: %w", err)
	}
	if prefix != want {
		return nil, fmt.Errorf("callout: the seed is of kind %s, want %s", prefix, want)
	}
	kp, err := nkeys.FromSeed(seed)
	if err != nil {
		return nil, fmt.Errorf("callout: %s seed: %w", want, err)
	}
	return kp, nil
}

// ReadKeys reads the Keys from dir, where the SecretName Secret is mounted,
// checking each seed's kind.
func ReadKeys(dir string) (Keys, error) {
	data := map[string][]byte{}
	for _, name := range KeyFiles {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return Keys{}, fmt.Errorf("callout: read the keys: %w", err)
		}
		data[name] = b
	}
	for _, name := range []string{AccountKey, NodeAccountsKey, LayoutKey} {
		switch b, err := os.ReadFile(filepath.Join(dir, name)); {
		case err == nil:
			data[name] = b
		case !errors.Is(err, iofs.ErrNotExist):
			return Keys{}, fmt.Errorf("callout: read %s: %w", name, err)
		}
	}
	return KeysFromData(data)
}

// KeyFiles are the files (and Secret keys) of the Keys: SecretData's keys.
var KeyFiles = []string{IssuerKey, XKeyKey, ServiceKey}

// KeysFromData is the Keys of SecretData's form, each seed's kind checked
// (AccountKey optional).
func KeysFromData(data map[string][]byte) (Keys, error) {
	var k Keys
	for _, f := range []struct {
		name string
		kind nkeys.PrefixByte
		kp   *nkeys.KeyPair
	}{
		{IssuerKey, nkeys.PrefixByteAccount, &k.Issuer},
		{XKeyKey, nkeys.PrefixByteCurve, &k.XKey},
		{ServiceKey, nkeys.PrefixByteUser, &k.Service},
	} {
		var err error
		if *f.kp, err = ParseSeed(data[f.name], f.kind); err != nil {
			return Keys{}, fmt.Errorf("callout: %s: %w", f.name, err)
		}
	}
	k.Account = string(bytes.TrimSpace(data[AccountKey]))
	if err := natsauth.CheckAccount(k.Account); err != nil {
		return Keys{}, fmt.Errorf("callout: %s: %w", AccountKey, err)
	}
	if b, ok := data[NodeAccountsKey]; ok {
		k.NodeAccounts = append([]string{}, strings.Fields(string(b))...)
		if k.Account == "" {
			return Keys{}, fmt.Errorf("callout: %s without %s: node accounts import from the streams' account", NodeAccountsKey, AccountKey)
		}
	}
	if b, ok := data[LayoutKey]; ok {
		l, err := natsauth.UnmarshalLayout(b)
		switch {
		case err != nil:
			return Keys{}, fmt.Errorf("callout: %s: %w", LayoutKey, err)
		case k.NodeAccounts != nil:
			return Keys{}, fmt.Errorf("callout: %s and %s: the node accounts are listed or follow the nodes, not both", LayoutKey, NodeAccountsKey)
		case l.Account != k.Account:
			return Keys{}, fmt.Errorf("callout: %s renders account %q, %s names %q", LayoutKey, l.Account, AccountKey, k.Account)
		}
		side, err := k.Server(0)
		if err != nil {
			return Keys{}, err
		}
		if l.Callout.Issuer != side.Issuer || l.Callout.XKey != side.XKey || l.Callout.Service.NKey != side.Service.NKey {
			return Keys{}, fmt.Errorf("callout: %s names other callout keys than the Secret's: generate both in one nats-auth run", LayoutKey)
		}
		k.Layout = &l
	}
	return k, nil
}
