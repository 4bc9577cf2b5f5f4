package projector

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// MaxNodeUpgradeNameLength bounds the names NodeUpgradeName returns. It is
// below the 253 characters of a DNS subdomain on purpose: client-go names
// each Kubernetes Event after the object it regards plus ".<16 hex digits>",
// and an Event whose name is too long is refused, so a longer name would
// make every Event about the node upgrade disappear.
const MaxNodeUpgradeNameLength = validation.DNS1123SubdomainMaxLength - 17

// hashLen is the length of the hash suffix of shortened names: 10 hex digits
// (40 bits) make a collision between two managers' nodes negligible.
const hashLen = 10

// NodeUpgradeName is the name of the NodeDataEngineUpgrade of node under the
// manager named manager: "<manager>-<node>-<hash of both>", the prefix cut
// to fit MaxNodeUpgradeNameLength. The hash is what keeps names apart that
// the readable part cannot: manager "a-b" with node "c" and manager "a" with
// node "b-c" (no character of a name can separate the two). The name is
// deterministic, so a restarted projector finds the object it created
// rather than making another one.
func NodeUpgradeName(manager, node string) string {
	return shorten(sanitizeName(manager+"-"+node), MaxNodeUpgradeNameLength, manager+"\x00"+node)
}

// legacyNodeUpgradeName is the name NodeUpgradeName gave before it hashed
// every name ("<manager>-<node>" when valid): objects of upgrades in flight
// under it are adopted (ensureNode), not duplicated.
func legacyNodeUpgradeName(manager, node string) string {
	name := manager + "-" + node
	if len(name) <= MaxNodeUpgradeNameLength && len(validation.IsDNS1123Subdomain(name)) == 0 {
		return name
	}
	return NodeUpgradeName(manager, node)
}

// labelValue returns s when it is a valid label value (at most 63 characters),
// else a shortened form with a hash suffix. Manager and node names may be up
// to 253 characters, which a label value cannot hold.
func labelValue(s string) string {
	if len(validation.IsValidLabelValue(s)) == 0 {
		return s
	}
	return shorten(sanitizeName(s), validation.LabelValueMaxLength, s)
}

// shorten cuts s so that s[:n]+"-"+hash(key) fits in limit, keeping the cut
// ending on an alphanumeric character as names and label values require.
func shorten(s string, limit int, key string) string {
	sum := sha256.Sum256([]byte(key))
	suffix := hex.EncodeToString(sum[:])[:hashLen]
	keep := min(len(s), limit-hashLen-1)
	prefix := strings.TrimRight(s[:keep], "-.")
	if prefix == "" {
		return suffix
	}
	return prefix + "-" + suffix
}

// sanitizeName maps s onto the DNS subdomain alphabet: lower case letters,
// digits, '-' and '.'. Kubernetes names already are; this only guards against
// names from history written by something else.
func sanitizeName(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, c := range strings.ToLower(s) {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '.':
			b.WriteRune(c)
		default:
			b.WriteByte('-')
		}
	}
	return strings.TrimLeft(b.String(), "-.")
}
