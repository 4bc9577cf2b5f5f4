package natsauth

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/switchback-dev/switchback/topology"
)

// The node-account layout (Config.NodeAccounts). NATS checks no permission
// on a request's reply subject, and JetStream publishes its answers (a
// direct get, a pull's deliveries) from its own client in the account of
// the streams: a user there who names JetStream's API, another node's
// command subject or its acks as the reply has JetStream act on its own
// answer. So every worker is alone in an account without JetStream, which
// imports from the streams' account exactly the subjects the worker's
// permissions allow (WorkerPermissions): a reply it redirects is delivered
// in its own account, where only its own imports lead back, and no account
// imports another node's subjects. The imports put the JetStream API under
// topology.NodeAPIPrefix; the worker's JetStream client must use that
// prefix (Authorization.APIPrefix).

// ReaderAccount is the reader's account in the node-account layout: like a
// worker's, alone, without JetStream, importing only JetStream's read calls
// on the event and dead-letter streams (no consumer API: it scans by
// direct gets, eventstore.Config.DirectScans).
func ReaderAccount(streams string) string { return streams + "-reader" }

// readerImports are the reader's publish allow list without the consumer
// API: what its account imports.
func readerImports(p Permissions) []string {
	var out []string
	for _, s := range p.PublishAllow {
		if !strings.HasPrefix(s, topology.JSAPI+"CONSUMER.") {
			out = append(out, s)
		}
	}
	return out
}

// NodeAccount is the account of node's worker in the node-account layout:
// the streams' account's name and the node's ('.' becomes '_', which a
// node name never holds, so no two nodes share one).
func NodeAccount(streams, node string) string {
	return streams + "-node-" + strings.ReplaceAll(node, ".", "_")
}

// responseThreshold is how long a streamed service import's answers may
// keep coming: above the longest pull a worker makes (a pull is answered
// by a message per command until it expires), so no delivery of a pull is
// dropped.
const responseThreshold = "2m"

// export is one subject of the streams' account that node accounts import.
type export struct {
	subject string
	// service: requests (answered); else a stream of messages (the
	// node's events, which wake its worker).
	service bool
	// streamed: the service answers a request with many messages (direct
	// batch gets, pulls).
	streamed bool
	accounts []string
}

// nodeImport is where an import puts a subject in the importing account:
// JetStream's API under topology.NodeAPIPrefix, anything else where it is.
func nodeImport(subject string) string {
	if rest, ok := strings.CutPrefix(subject, topology.JSAPI); ok {
		return topology.NodeAPIPrefix + rest
	}
	return subject
}

// streamedService reports whether the API call subject answers with many
// messages.
func streamedService(subject string) bool {
	return strings.HasPrefix(subject, topology.JSAPI+"DIRECT.GET.") || strings.HasPrefix(subject, topology.JSAPI+"CONSUMER.MSG.NEXT.")
}

// nodeAccountExports lists what the streams' account exports to the node
// accounts: each worker's publish allow list as services and its
// subscriptions outside its inbox as streams, each subject exported to
// exactly the accounts whose worker needs it, in a stable order.
func (a *Authorization) nodeAccountExports() []export {
	index := map[string]int{}
	var out []export
	add := func(subject string, service bool, account string) {
		key := strconv.FormatBool(service) + " " + subject
		i, ok := index[key]
		if !ok {
			i = len(out)
			index[key] = i
			out = append(out, export{subject: subject, service: service, streamed: service && streamedService(subject)})
		}
		out[i].accounts = append(out[i].accounts, account)
	}
	reader := ReaderAccount(a.cfg.Account)
	add(topology.JSAPI+"INFO", true, reader)
	for _, s := range readerImports(ReaderPermissions(a.cfg.Streams)) {
		add(s, true, reader)
	}
	for _, node := range a.cfg.Nodes {
		account := NodeAccount(a.cfg.Account, node)
		add(topology.JSAPI+"INFO", true, account)
		p := WorkerPermissions(node, a.cfg.Streams, a.cfg.SharedInbox, a.cfg.WorkerExtraPublish...)
		for _, s := range p.PublishAllow {
			add(s, true, account)
		}
		for _, s := range p.SubscribeAllow {
			if !strings.HasPrefix(s, topology.InboxPrefix) {
				add(s, false, account)
			}
		}
	}
	return out
}

// NodeWorkerPermissions are a worker's permissions in its node's account:
// its WorkerPermissions p as its imports put them.
func NodeWorkerPermissions(p Permissions) Permissions {
	return importedPermissions(p, p.PublishAllow)
}

// readerAccountPermissions are the reader's permissions in its account.
func readerAccountPermissions(p Permissions) Permissions {
	return importedPermissions(p, readerImports(p))
}

// importedPermissions are p with the publish allow list imports, as the
// account's imports put them.
func importedPermissions(p Permissions, imports []string) Permissions {
	out := Permissions{SubscribeAllow: p.SubscribeAllow, SubscribeDeny: p.SubscribeDeny}
	for _, s := range imports {
		out.PublishAllow = append(out.PublishAllow, nodeImport(s))
	}
	out.PublishAllow = append(out.PublishAllow, nodeImport(topology.JSAPI+"INFO"))
	for _, s := range p.PublishDeny {
		out.PublishDeny = append(out.PublishDeny, s, nodeImport(s))
	}
	return out
}

// writeExports renders the streams' account's exports.
func writeExports(b *strings.Builder, in string, exports []export) {
	b.WriteString(in + "exports = [\n")
	for _, e := range exports {
		kind := "stream"
		if e.service {
			kind = "service"
		}
		fmt.Fprintf(b, "%s  { %s: %s, accounts: [%s]", in, kind, strconv.Quote(e.subject), quoteAll(e.accounts))
		if e.streamed {
			fmt.Fprintf(b, ", response: stream, response_threshold: %s", strconv.Quote(responseThreshold))
		}
		b.WriteString(" }\n")
	}
	b.WriteString(in + "]\n")
}

// writeAccountOf renders the account of a user alone in it (a worker in its
// node's, the reader in its own): its user (none when the callout places
// it), and its imports of the exports naming it.
func (a *Authorization) writeAccountOf(b *strings.Builder, in, account string, u *User, comment string, exports []export) {
	fmt.Fprintf(b, "%s%s {\n", in, strconv.Quote(account))
	if u != nil {
		b.WriteString(in + "  users = [\n")
		writeUser(b, in+"    ", *u, comment)
		b.WriteString(in + "  ]\n")
	} else {
		fmt.Fprintf(b, "%s  # %s\n", in, comment)
	}
	b.WriteString(in + "  imports = [\n")
	for _, e := range exports {
		if !slices.Contains(e.accounts, account) {
			continue
		}
		if e.service {
			fmt.Fprintf(b, "%s    { service: { account: %s, subject: %s }, to: %s }\n", in, strconv.Quote(a.cfg.Account), strconv.Quote(e.subject), strconv.Quote(nodeImport(e.subject)))
		} else {
			fmt.Fprintf(b, "%s    { stream: { account: %s, subject: %s } }\n", in, strconv.Quote(a.cfg.Account), strconv.Quote(e.subject))
		}
	}
	b.WriteString(in + "  ]\n")
	b.WriteString(in + "}\n")
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}
