package plan

import (
	"fmt"
	"strings"
	"time"
)

// AwayAllowance is the plan's estimate of how long a node's replicas are
// away: from the moment the upgrade fails them to the moment Longhorn may
// reuse them, once the node's targets moved off, its instance manager was
// replaced (a v2 instance manager starts in about a minute), the targets
// moved back and the node's replica scheduling was restored. Hashing and
// temporary replicas come before the replicas are failed, and a reused
// replica waiting for its turn to rebuild is no longer failed, so neither
// counts.
const AwayAllowance = 5 * time.Minute

// DefaultCopyRate is the rate, in bytes per second, at which Longhorn is
// taken to copy a replica when nothing better is known: the worker's
// --copy-rate default.
const DefaultCopyRate int64 = 100 << 20

// replenishWarning says, when Longhorn's replica-replenishment-wait-interval
// is shorter than AwayAllowance, what that costs the nodes of p holding
// replicas to fail, and what to set; "" when it is not, or unknown.
func replenishWarning(c Cluster, p Plan) string {
	if c.Rebuild == nil || c.Rebuild.ReplenishWait < 0 || c.Rebuild.ReplenishWait >= AwayAllowance {
		return ""
	}
	var nodes []string
	for _, n := range p.Nodes {
		if len(n.Replicas) > 0 {
			nodes = append(nodes, n.Node)
		}
	}
	if len(nodes) == 0 {
		return ""
	}
	return fmt.Sprintf("Longhorn's replica-replenishment-wait-interval is %d s, shorter than the about %s a node's replicas are away (targets moved off and back, "+
		"its instance manager replaced): on %s Longhorn would build each failed replica again on another node, a whole copy, and a switch-over waits while one is due; "+
		"set it to at least %d for the upgrade",
		int64(c.Rebuild.ReplenishWait/time.Second), AwayAllowance, strings.Join(nodes, ", "), int64(AwayAllowance/time.Second))
}
