package natsauth

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/nats-io/nats-server/v2/server"
)

// Apply applies the authorization to the options of a server about to start:
// it processes ServerConfig's text exactly as nats-server would read it from
// a file, so the embedded server of the tests and the demo runs the
// configuration operators deploy.
func (a *Authorization) Apply(o *server.Options) error {
	if err := o.ProcessConfigString(a.text); err != nil {
		return fmt.Errorf("natsauth: apply the authorization: %w", err)
	}
	return nil
}

// Configure is Apply in the shape of natsembed.Options.Configure, which
// cannot return an error. Generate already loaded the same text, so it does
// not fail in practice; should it fail anyway, it fails closed: the server
// gets an authorization token nobody knows, so that no client is let in
// without the intended permissions.
func (a *Authorization) Configure(o *server.Options) {
	if err := a.Apply(o); err != nil {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		o.Users, o.Nkeys, o.Username, o.Password = nil, nil, "", ""
		o.Authorization = hex.EncodeToString(b)
		o.NoAuthUser = ""
	}
}

// check loads text into scratch options, as the server would at start.
func check(text string) error {
	var o server.Options
	return o.ProcessConfigString(text)
}
