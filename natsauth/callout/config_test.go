package callout_test

import (
	"cmp"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/natsauth"
	"github.com/switchback-dev/switchback/natsauth/callout"
)

// TestServerConfig: the generated configuration of callout mode loads into
// nats-server with exactly the static users as auth_users (the controller,
// the reader, the callout service), no seed in it, and the service allowed
// nothing but its answers; a callout configuration that could not work is
// refused.
func TestServerConfig(t *testing.T) {
	keys, err := callout.GenerateKeys()
	require.NoError(t, err)
	srv, err := keys.Server(3 * time.Second)
	require.NoError(t, err)
	for _, tc := range []struct {
		mode    natsauth.Mode
		account string
	}{{natsauth.ModeNKey, natsauth.DefaultAccount}, {natsauth.ModePassword, natsauth.DefaultAccount}, {natsauth.ModeNKey, ""}} {
		t.Run(string(tc.mode)+" in account "+tc.account, func(t *testing.T) {
			auth, err := natsauth.Generate(natsauth.Config{Callout: srv, Mode: tc.mode, Account: tc.account, BcryptCost: 4})
			require.NoError(t, err)
			text := auth.ServerConfig()
			t.Log("\n" + text)
			var o server.Options
			require.NoError(t, o.ProcessConfigString(text))
			require.NotNil(t, o.AuthCallout)
			want := cmp.Or(tc.account, server.DEFAULT_GLOBAL_ACCOUNT)
			assert.Equal(t, want, o.AuthCallout.Account, "the callout's users are in Switchback's account")
			if tc.account != "" {
				i := slices.IndexFunc(o.Accounts, func(a *server.Account) bool { return a.Name == tc.account })
				require.GreaterOrEqual(t, i, 0, "the account is defined")
			}
			assert.Equal(t, srv.Issuer, o.AuthCallout.Issuer)
			assert.Equal(t, srv.XKey, o.AuthCallout.XKey)
			id := func(c natsauth.Credential) string {
				if c.NKey != "" {
					return c.NKey
				}
				return c.User
			}
			assert.Equal(t, []string{id(auth.Controller.Credential), id(auth.Reader.Credential), srv.Service.NKey}, o.AuthCallout.AuthUsers)
			assert.InDelta(t, 3.0, o.AuthTimeout, 0.001)
			assert.Empty(t, auth.Workers, "no worker user: the callout decides them")
			for _, u := range o.Nkeys {
				if u.Nkey != srv.Service.NKey {
					continue
				}
				p := u.Permissions
				assert.Equal(t, []string{">"}, p.Publish.Deny, "the service publishes nothing...")
				require.NotNil(t, p.Response, "...but its answers")
				assert.Equal(t, 1, p.Response.MaxMsgs)
				assert.Equal(t, []string{server.AuthCalloutSubject}, p.Subscribe.Allow)
			}
			seeds, err := keys.SecretData()
			require.NoError(t, err)
			for name, seed := range seeds {
				assert.NotContains(t, text, string(seed[:len(seed)-1]), "no seed in the configuration (%s)", name)
			}
		})
	}

	ctrl := userKey(t)
	for name, bad := range map[string]natsauth.Config{
		"issuer is not an account key": {Callout: &natsauth.Callout{Issuer: ctrl, Service: srv.Service}},
		"xkey is not a curve key":      {Callout: &natsauth.Callout{Issuer: srv.Issuer, XKey: srv.Issuer, Service: srv.Service}},
		"service without credential":   {Callout: &natsauth.Callout{Issuer: srv.Issuer}},
		"nodes listed":                 {Callout: srv, Nodes: []string{"n1"}},
		"a bad account":                {Callout: srv, Account: "A B"},
	} {
		_, err := natsauth.Generate(bad)
		assert.Error(t, err, name)
	}
}

// TestKeys: the Secret's seeds read back as the keys they are, and a
// swapped file is refused.
func TestKeys(t *testing.T) {
	keys, err := callout.GenerateKeys()
	require.NoError(t, err)
	data, err := keys.SecretData()
	require.NoError(t, err)
	require.Len(t, data, 3)
	for key, want := range map[string]struct {
		prefix nkeys.PrefixByte
		kp     nkeys.KeyPair
	}{
		callout.IssuerKey:  {nkeys.PrefixByteAccount, keys.Issuer},
		callout.XKeyKey:    {nkeys.PrefixByteCurve, keys.XKey},
		callout.ServiceKey: {nkeys.PrefixByteUser, keys.Service},
	} {
		kp, err := callout.ParseSeed(data[key], want.prefix)
		require.NoError(t, err, key)
		got, err := kp.PublicKey()
		require.NoError(t, err)
		pub, err := want.kp.PublicKey()
		require.NoError(t, err)
		assert.Equal(t, pub, got, key)
	}
	_, err = callout.ParseSeed(data[callout.ServiceKey], nkeys.PrefixByteAccount)
	assert.ErrorContains(t, err, "of kind user, want account")
	_, err = callout.ParseSeed([]byte("garbage"), nkeys.PrefixByteAccount)
	assert.Error(t, err)

	// The account and the node-account layout's nodes travel with the keys.
	keys.Account, keys.NodeAccounts = natsauth.DefaultAccount, []string{"n1", "n2.example.com"}
	data, err = keys.SecretData()
	require.NoError(t, err)
	back, err := callout.KeysFromData(data)
	require.NoError(t, err)
	assert.Equal(t, keys.Account, back.Account)
	assert.Equal(t, keys.NodeAccounts, back.NodeAccounts)
	delete(data, callout.AccountKey)
	_, err = callout.KeysFromData(data)
	assert.ErrorContains(t, err, "node accounts import from the streams' account")
}

func userKey(t *testing.T) string {
	t.Helper()
	kp, err := nkeys.CreateUser()
	require.NoError(t, err)
	pub, err := kp.PublicKey()
	require.NoError(t, err)
	return pub
}
