package natsauth

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Layout is everything that renders the servers' authorization in the
// node-account layout with the callout except the nodes: the public halves
// of the static users, the callout's public keys, the account and its
// limits. It holds no secret (the configuration it renders holds only what
// it holds), so the controller may keep it beside the callout's keys and
// render the configuration again whenever the cluster's nodes change
// (Render), without the generator's private keys.
type Layout struct {
	Mode               Mode       `json:"mode"`
	Account            string     `json:"account"`
	Limits             Limits     `json:"limits"`
	Streams            Streams    `json:"streams"`
	SharedInbox        bool       `json:"sharedInbox,omitempty"`
	WorkerExtraPublish []string   `json:"workerExtraPublish,omitempty"`
	Controller         Credential `json:"controller"`
	Reader             Credential `json:"reader"`
	Callout            *Callout   `json:"callout"`
}

// Layout is a's Layout, with the static users' public halves only. It is
// an error outside the node-account layout with the callout, the only one
// whose nodes change the servers' configuration without a new credential.
func (a *Authorization) Layout() (Layout, error) {
	if a.cfg.Callout == nil || !a.cfg.NodeAccounts {
		return Layout{}, errors.New("natsauth: a layout is the node-account layout with the callout")
	}
	public := func(c Credential) Credential {
		return Credential{User: c.User, NKey: c.NKey, PasswordHash: c.PasswordHash}
	}
	callout := *a.cfg.Callout
	callout.Service = public(callout.Service)
	return Layout{
		Mode: a.cfg.Mode, Account: a.cfg.Account, Limits: a.cfg.Limits, Streams: a.cfg.Streams,
		SharedInbox: a.cfg.SharedInbox, WorkerExtraPublish: a.cfg.WorkerExtraPublish,
		Controller: public(a.Controller.Credential), Reader: public(a.Reader.Credential), Callout: &callout,
	}, nil
}

// Render is the authorization of l with an account for each of nodes
// (none is valid: the callout then places no worker).
func (l Layout) Render(nodes []string) (*Authorization, error) {
	if l.Callout == nil {
		return nil, errors.New("natsauth: the layout has no callout")
	}
	callout := *l.Callout
	return Generate(Config{
		Nodes: nodes, Mode: l.Mode, Account: l.Account, NodeAccounts: true, Limits: l.Limits, Streams: l.Streams,
		SharedInbox: l.SharedInbox, WorkerExtraPublish: l.WorkerExtraPublish, Callout: &callout,
		Existing: map[string]Credential{"": l.Controller, ReaderKey: l.Reader},
	})
}

// MarshalLayout is l as the controller keeps it (JSON).
func MarshalLayout(l Layout) ([]byte, error) {
	b, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("natsauth: layout: %w", err)
	}
	return append(b, '\n'), nil
}

// UnmarshalLayout reads a layout MarshalLayout wrote and checks that it
// renders.
func UnmarshalLayout(data []byte) (Layout, error) {
	var l Layout
	if err := json.Unmarshal(data, &l); err != nil {
		return Layout{}, fmt.Errorf("natsauth: layout: %w", err)
	}
	if _, err := l.Render(nil); err != nil {
		return Layout{}, fmt.Errorf("natsauth: layout does not render: %w", err)
	}
	return l, nil
}
