package natsauth_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/natsauth"
	"github.com/switchback-dev/switchback/natsauth/callout"
)

func calloutSide(t *testing.T) *natsauth.Callout {
	t.Helper()
	keys, err := callout.GenerateKeys()
	require.NoError(t, err)
	side, err := keys.Server(0)
	require.NoError(t, err)
	return side
}

// TestLayoutRendersWhatGenerateRenders: a layout kept as JSON renders, for
// any set of nodes (none too), exactly the configuration the generator
// writes for them with the same keys, and holds no private key; it exists
// only for the node-account layout with the callout.
func TestLayoutRendersWhatGenerateRenders(t *testing.T) {
	for _, mode := range []natsauth.Mode{natsauth.ModeNKey, natsauth.ModePassword} {
		t.Run(string(mode), func(t *testing.T) {
			side := calloutSide(t)
			if mode == natsauth.ModePassword {
				side.Service = natsauth.Credential{PasswordHash: "$2a$04$" + strings.Repeat("a", 53)}
			}
			first, err := natsauth.Generate(natsauth.Config{Mode: mode, Account: natsauth.DefaultAccount, NodeAccounts: true, Callout: side, BcryptCost: 4})
			require.NoError(t, err, "no node yet")
			layout, err := first.Layout()
			require.NoError(t, err)
			raw, err := natsauth.MarshalLayout(layout)
			require.NoError(t, err)
			for _, secret := range []string{first.Controller.Credential.Password, first.Reader.Credential.Password, string(first.Controller.Credential.Seed), string(first.Reader.Credential.Seed)} {
				if secret != "" {
					assert.NotContains(t, string(raw), secret, "the layout holds no private key or password")
				}
			}
			kept, err := natsauth.UnmarshalLayout(raw)
			require.NoError(t, err)

			for _, nodes := range [][]string{nil, {"n1"}, {"n2", "n1", "n3.example"}} {
				got, err := kept.Render(nodes)
				require.NoError(t, err)
				want, err := natsauth.Generate(natsauth.Config{Mode: mode, Account: natsauth.DefaultAccount, NodeAccounts: true, Callout: side, Nodes: nodes,
					Existing: map[string]natsauth.Credential{"": first.Controller.Credential, natsauth.ReaderKey: first.Reader.Credential}})
				require.NoError(t, err)
				assert.Equal(t, want.ServerConfig(), got.ServerConfig(), "nodes %v", nodes)
				for _, n := range nodes {
					assert.Contains(t, got.ServerConfig(), natsauth.NodeAccount(natsauth.DefaultAccount, n))
				}
			}
			_, err = kept.Render([]string{"Not_A_Node"})
			assert.ErrorContains(t, err, "Not_A_Node")
		})
	}
	shared, err := natsauth.Generate(natsauth.Config{Account: natsauth.DefaultAccount, Callout: calloutSide(t)})
	require.NoError(t, err)
	_, err = shared.Layout()
	assert.Error(t, err, "the shared account's configuration does not change with the nodes")
	_, err = natsauth.UnmarshalLayout([]byte(`{"mode":"nkey"}`))
	assert.ErrorContains(t, err, "no callout")
}
