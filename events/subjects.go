package events

import (
	"fmt"
	"strconv"
	"strings"
)

// SubjectPrefix is the first token of every event subject.
const SubjectPrefix = "sb.evt"

// StreamSubjects is the subject filter of the event stream.
const StreamSubjects = SubjectPrefix + ".>"

// ManagerRef identifies one DataEngineUpgradeManager incarnation. The UID is
// part of the identity because a manager deleted and created again under the
// same name is a new upgrade with a history of its own.
type ManagerRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
}

// String returns namespace/name, the form operators type.
func (m ManagerRef) String() string { return m.Namespace + "/" + m.Name }

// AggregateID names one aggregate: the manager itself when Node is empty, else
// the upgrade of Node under that manager.
type AggregateID struct {
	Manager ManagerRef
	Node    string
}

// ManagerAggregate returns the id of the manager aggregate of m.
func ManagerAggregate(m ManagerRef) AggregateID { return AggregateID{Manager: m} }

// NodeAggregate returns the id of the upgrade of node under m.
func NodeAggregate(m ManagerRef, node string) AggregateID {
	return AggregateID{Manager: m, Node: node}
}

// IsNode reports whether a is a node-upgrade aggregate.
func (a AggregateID) IsNode() bool { return a.Node != "" }

// Validate reports a missing or empty identity part.
func (a AggregateID) Validate() error {
	if a.Manager.Namespace == "" || a.Manager.Name == "" || a.Manager.UID == "" {
		return fmt.Errorf("aggregate %q: namespace, name and uid are required", a.String())
	}
	return nil
}

// String is the CloudEvents "subject" of the aggregate's events:
// namespace/name for a manager, namespace/name/nodes/node for a node upgrade.
func (a AggregateID) String() string {
	if a.IsNode() {
		return a.Manager.String() + "/nodes/" + a.Node
	}
	return a.Manager.String()
}

// Subject is the JetStream subject that holds the aggregate's events:
// sb.evt.<ns>.<name>.<uid>.mgr or sb.evt.<ns>.<name>.<uid>.node.<node>.
// Every name is encoded with EncodeToken, so dotted Kubernetes names stay one token.
func (a AggregateID) Subject() string {
	base := ManagerSubjectPrefix(a.Manager)
	if a.IsNode() {
		return base + ".node." + EncodeToken(a.Node)
	}
	return base + ".mgr"
}

// ManagerSubjectPrefix is the subject prefix shared by a manager and all its
// node upgrades; ManagerSubjectPrefix(m)+".>" selects the whole upgrade.
func ManagerSubjectPrefix(m ManagerRef) string {
	return SubjectPrefix + "." + EncodeToken(m.Namespace) + "." + EncodeToken(m.Name) + "." + EncodeToken(m.UID)
}

// ManagerNameSubjects selects the events of every incarnation (any UID) of
// the manager name in namespace ("" = in any namespace), and their nodes'.
func ManagerNameSubjects(namespace, name string) string {
	ns := "*"
	if namespace != "" {
		ns = EncodeToken(namespace)
	}
	return SubjectPrefix + "." + ns + "." + EncodeToken(name) + ".>"
}

// ManagerSubjects selects every manager's subject (not their nodes').
const ManagerSubjects = SubjectPrefix + ".*.*.*.mgr"

// NodeSubjects selects node's subject under every manager.
func NodeSubjects(node string) string { return SubjectPrefix + ".*.*.*.node." + EncodeToken(node) }

// ParseSubject is the inverse of AggregateID.Subject.
func ParseSubject(subject string) (AggregateID, error) {
	rest, ok := strings.CutPrefix(subject, SubjectPrefix+".")
	if !ok {
		return AggregateID{}, fmt.Errorf("subject %q: not under %s", subject, SubjectPrefix)
	}
	var buf [5]string
	tok := splitTokens(rest, buf[:0])
	var id AggregateID
	switch {
	case len(tok) == 4 && tok[3] == "mgr":
	case len(tok) == 5 && tok[3] == "node":
		node, err := DecodeToken(tok[4])
		if err != nil {
			return AggregateID{}, fmt.Errorf("subject %q: node: %w", subject, err)
		}
		id.Node = node
	default:
		return AggregateID{}, fmt.Errorf("subject %q: want %s.<ns>.<name>.<uid>.mgr or ….node.<node>", subject, SubjectPrefix)
	}
	parts := []*string{&id.Manager.Namespace, &id.Manager.Name, &id.Manager.UID}
	for i, p := range parts {
		v, err := DecodeToken(tok[i])
		if err != nil {
			return AggregateID{}, fmt.Errorf("subject %q: %w", subject, err)
		}
		*p = v
	}
	if err := id.Validate(); err != nil {
		return AggregateID{}, fmt.Errorf("subject %q: %w", subject, err)
	}
	return id, nil
}

// EncodeToken makes s usable as one NATS subject token, reversibly. Characters
// valid in Kubernetes names ([a-z0-9-]) pass through so subjects stay readable
// in `nats sub`; "." (legal in node names) becomes "_"; every other byte
// (including "_" itself) becomes "~XX" in upper-case hex. An empty string
// encodes to "~", so it still occupies a token.
func EncodeToken(s string) string {
	if s == "" {
		return "~"
	}
	// Kubernetes names nearly always pass through (or only have dots): no
	// builder then, as this runs several times for every event written.
	plain, dots := true, false
	for i := 0; i < len(s) && plain; i++ {
		switch c := s[i]; {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-':
		case c == '.':
			dots = true
		default:
			plain = false
		}
	}
	if plain && !dots {
		return s
	}
	if plain {
		return strings.ReplaceAll(s, ".", "_")
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-':
			b.WriteByte(c)
		case c == '.':
			b.WriteByte('_')
		default:
			fmt.Fprintf(&b, "~%02X", c)
		}
	}
	return b.String()
}

// DecodeToken is the inverse of EncodeToken.
func DecodeToken(tok string) (string, error) {
	if tok == "~" {
		return "", nil
	}
	if out, ok := decodePlainToken(tok); ok {
		return out, nil
	}
	var b strings.Builder
	b.Grow(len(tok))
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		switch {
		case c == '_':
			b.WriteByte('.')
		case c == '~':
			if i+2 >= len(tok) {
				return "", fmt.Errorf("token %q: truncated escape at %d", tok, i)
			}
			v, err := strconv.ParseUint(tok[i+1:i+3], 16, 8)
			if err != nil {
				return "", fmt.Errorf("token %q: bad escape at %d: %w", tok, i, err)
			}
			b.WriteByte(byte(v))
			i += 2
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-':
			b.WriteByte(c)
		default:
			return "", fmt.Errorf("token %q: unexpected byte %q at %d", tok, c, i)
		}
	}
	// Only the canonical spelling is accepted, so two subjects can never name
	// the same aggregate (which would defeat per-subject concurrency control).
	if out := b.String(); EncodeToken(out) == tok {
		return out, nil
	}
	return "", fmt.Errorf("token %q: not in canonical encoding (want %q)", tok, EncodeToken(b.String()))
}

// decodePlainToken decodes, without building and re-encoding, a token made
// only of pass-through bytes and "_": the spelling of nearly every subject,
// decoded on every event read. Such a token is always canonical.
func decodePlainToken(tok string) (string, bool) {
	if tok == "" {
		return "", false
	}
	dots := false
	for i := 0; i < len(tok); i++ {
		switch c := tok[i]; {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-':
		case c == '_':
			dots = true
		default:
			return "", false
		}
	}
	if dots {
		return strings.ReplaceAll(tok, "_", "."), true
	}
	return tok, true
}

// splitTokens is strings.Split(s, ".") into buf, without allocating for the
// five tokens a valid subject has (more are appended as usual).
func splitTokens(s string, buf []string) []string {
	for {
		i := strings.IndexByte(s, '.')
		if i < 0 {
			return append(buf, s)
		}
		buf = append(buf, s[:i])
		s = s[i+1:]
	}
}
