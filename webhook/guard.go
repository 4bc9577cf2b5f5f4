package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/longhorn"
)

// The guard keeps new v2 work off the nodes being upgraded: a v2 volume
// attached to such a node puts an initiator in the instance manager about to
// be replaced, and an engine moved there puts a target in it. Released
// Longhorn has no node field that stops either (replica scheduling is the
// only one, and the node steps set it), so the guard refuses the two writes
// that cause them, where users and CSI make them: a new attachment ticket
// for the node (Longhorn's VolumeAttachment controller sets spec.nodeID from
// tickets) and a change of spec.engineNodeID to the node. Existing tickets,
// detaches, status writes, tickets for a volume already on the node and
// Switchback's own writes (the switch-back restores engineNodeID onto the
// node) pass; Longhorn's own controllers asking to attach a detached v2
// volume to the node (a snapshot or a rebuild on its owner node) are
// refused like anyone, and their retries pass once the node's upgrade is
// over. The guard fails open: what it cannot decide is allowed, and
// its configuration's failurePolicy is Ignore, so that Longhorn keeps
// working while Switchback is down; the node steps' own checks on live
// state (no initiator and no target on the node right before its IM may go)
// remain the last line.

// The guard also keeps a volume's snapshots through its switch-overs:
// Longhorn's engine controller syncs the Snapshot objects of every engine,
// a switch-over's new engine included, whose snapshot list is still empty,
// and deletes the objects that list lacks; the snapshot controller then
// deletes the snapshots from every replica once one engine is left
// (docs/longhorn-evidence.md §8.4). So no Snapshot object of a v2 volume is
// deleted while its target moves, by anyone: the deletion is retried by
// whoever asked (Longhorn's engine controller requeues it, and by then the
// new engine lists the snapshots), a user's passes once the move ended.

// GuardPath is where the apiserver posts reviews of Longhorn
// VolumeAttachments, Volumes and Snapshots (deploy/webhook/guard.yaml).
const GuardPath = "/guard-longhorn-v2-placement"

// Names of the guard's configuration and its webhooks (deploy/webhook).
const (
	GuardConfigurationName = "switchback-guard"
	GuardAttachmentsName   = "guard-volumeattachments.switchback.longhorn.io"
	GuardVolumesName       = "guard-volumes.switchback.longhorn.io"
	GuardSnapshotsName     = "guard-snapshots.switchback.longhorn.io"
)

// DefaultGuardTimeout bounds one guard decision: below the configuration's
// timeoutSeconds (2), so that the decision, not the apiserver's deadline,
// answers.
const DefaultGuardTimeout = 1500 * time.Millisecond

// NodeUpgrade is a node being upgraded, as the guard names it in a denial.
type NodeUpgrade struct {
	// Manager is the DataEngineUpgradeManager as namespace/name.
	Manager string
	// State is the node upgrade's state.
	State v1beta2.NodeUpgradeState
}

// UpgradingNodes lists the nodes being upgraded now, by node name.
type UpgradingNodes interface {
	UpgradingNodes(ctx context.Context) (map[string]NodeUpgrade, error)
}

// UpgradingFromStore reads the nodes being upgraded from an informer store
// of NodeDataEngineUpgrades (which the controller projects): a node counts
// while its node upgrade is at work (v1beta2.NodeUpgradeState.Working), from
// initializing until it is completed, error or cancelled.
type UpgradingFromStore struct {
	// Store holds *v1beta2.NodeDataEngineUpgrade objects.
	Store cache.Store
	// Namespace is the managed namespace; node upgrades elsewhere are
	// nobody's.
	Namespace string
	// HasSynced, when set, must report true before the store is trusted.
	HasSynced func() bool
}

// UpgradingNodes implements UpgradingNodes.
func (s UpgradingFromStore) UpgradingNodes(context.Context) (map[string]NodeUpgrade, error) {
	if s.HasSynced != nil && !s.HasSynced() {
		return nil, errors.New("the NodeDataEngineUpgrade informer has not synced yet")
	}
	out := map[string]NodeUpgrade{}
	for _, obj := range s.Store.List() {
		nu, ok := obj.(*v1beta2.NodeDataEngineUpgrade)
		if !ok || nu.Namespace != s.Namespace || !nu.Status.State.Working() {
			continue
		}
		out[nu.Spec.NodeID] = NodeUpgrade{Manager: nu.Namespace + "/" + nu.Spec.DataEngineUpgradeManager, State: nu.Status.State}
	}
	return out, nil
}

// GuardConfig is what a Guard needs.
type GuardConfig struct {
	// Upgrading lists the nodes being upgraded.
	Upgrading UpgradingNodes
	// Cluster tells a volume's data engine (only v2 volumes are guarded).
	Cluster dataplane.Reader
	// Trusted are the users whose writes always pass: Switchback's workers,
	// whose switch-back moves engines onto the node being upgraded.
	Trusted []string
	// Disabled makes the guard allow everything (the controller's
	// --guard-longhorn=false), for clusters that do not want the rule.
	Disabled bool
	// Logger receives one line per denial; nil discards.
	Logger *slog.Logger
	// Timeout bounds one decision; zero means DefaultGuardTimeout.
	Timeout time.Duration
}

// Guard decides admission requests for Longhorn VolumeAttachments and
// Volumes.
type Guard struct {
	cfg GuardConfig
	log *slog.Logger
}

// NewGuard returns a Guard for cfg; Upgrading and Cluster are required
// unless it is disabled.
func NewGuard(cfg GuardConfig) (*Guard, error) {
	if !cfg.Disabled && (cfg.Upgrading == nil || cfg.Cluster == nil) {
		return nil, errors.New("webhook: new guard: Upgrading and Cluster are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultGuardTimeout
	}
	return &Guard{cfg: cfg, log: cfg.Logger.With(slog.String("component", "guard"))}, nil
}

var (
	volumeAttachmentKind = metav1.GroupVersionKind{Group: longhorn.GroupVersion.Group, Version: longhorn.GroupVersion.Version, Kind: "VolumeAttachment"}
	volumeKind           = metav1.GroupVersionKind{Group: longhorn.GroupVersion.Group, Version: longhorn.GroupVersion.Version, Kind: longhorn.KindVolume}
	snapshotKind         = metav1.GroupVersionKind{Group: longhorn.GroupVersion.Group, Version: longhorn.GroupVersion.Version, Kind: longhorn.KindSnapshot}
)

// Admit answers one review. Anything it cannot decide is allowed (see the
// package's guard rules): a denial must always be a node under upgrade.
func (g *Guard) Admit(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if g.cfg.Disabled {
		return allow()
	}
	if req.Kind == snapshotKind {
		// Whoever deletes: Longhorn's own engine controller above all.
		if req.Operation != admissionv1.Delete {
			return allow()
		}
	} else if slices.Contains(g.cfg.Trusted, req.UserInfo.Username) ||
		(req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) {
		return allow()
	}
	log := g.log.With(slog.String("kind", req.Kind.Kind), slog.String("name", req.Name), slog.String("user", req.UserInfo.Username))
	ctx, cancel := context.WithTimeout(ctx, g.cfg.Timeout)
	defer cancel()
	var denial string
	var err error
	switch req.Kind {
	case volumeAttachmentKind:
		denial, err = g.attachment(ctx, req)
	case volumeKind:
		denial, err = g.engineNode(ctx, req)
	case snapshotKind:
		denial, err = g.snapshot(ctx, req)
	default:
		log.Warn("review of a kind the guard does not check: check the guard configuration's rules")
		return allow()
	}
	if err != nil {
		log.Warn("guard could not decide; allowed", slog.Any("error", err))
		return allow()
	}
	if denial == "" {
		return allow()
	}
	log.Info("guard denied a write", slog.String("reason", denial))
	// 403: the request is well formed; the upgrade in progress refuses it
	// for now.
	return deny(http.StatusForbidden, metav1.StatusReasonForbidden, denial)
}

// attachment refuses a new ticket, or a ticket moved, to a node being
// upgraded, for a v2 volume that is neither attached there nor asked there
// by a ticket it already has: only a request that would put the volume on
// the node. Tickets kept as they were (Longhorn bumps their generation),
// removed ones, and Longhorn's own tickets for a volume already there
// (snapshots, backups, rebuilds of an attached volume) pass.
func (g *Guard) attachment(ctx context.Context, req *admissionv1.AdmissionRequest) (string, error) {
	var obj, old longhorn.VolumeAttachment
	if err := decodeObject(req.Object.Raw, &obj); err != nil {
		return "", err
	}
	if req.Operation == admissionv1.Update {
		if err := decodeObject(req.OldObject.Raw, &old); err != nil {
			return "", err
		}
	}
	added := newTickets(old.Spec.AttachmentTickets, obj.Spec.AttachmentTickets)
	if len(added) == 0 {
		return "", nil
	}
	upgrading, err := g.cfg.Upgrading.UpgradingNodes(ctx)
	if err != nil {
		return "", err
	}
	asked := map[string]bool{}
	for _, t := range old.Spec.AttachmentTickets {
		asked[t.NodeID] = true
	}
	var refused []string
	for _, t := range added {
		if u, ok := upgrading[t.NodeID]; ok && !asked[t.NodeID] {
			refused = append(refused, fmt.Sprintf("ticket %s (%s) for node %s, whose v2 data engine is being upgraded by DataEngineUpgradeManager %s (%s)",
				t.ID, t.Type, t.NodeID, u.Manager, u.State))
		}
	}
	if len(refused) == 0 {
		return "", nil
	}
	v, err := g.volume(ctx, obj.Spec.Volume)
	if err != nil || v.DataEngine != dataplane.DataEngineV2 {
		return "", err
	}
	if _, there := upgrading[v.AttachedNode]; there {
		return "", nil // attached there already: nothing lands anew
	}
	return fmt.Sprintf("attaching v2 volume %s is refused while its node is upgraded: %s; it is retried and passes once that node's upgrade is over",
		obj.Spec.Volume, strings.Join(refused, "; ")), nil
}

// engineNode refuses setting a v2 volume's spec.engineNodeID to a node
// being upgraded.
func (g *Guard) engineNode(ctx context.Context, req *admissionv1.AdmissionRequest) (string, error) {
	var obj, old longhorn.Volume
	if err := decodeObject(req.Object.Raw, &obj); err != nil {
		return "", err
	}
	if req.Operation == admissionv1.Update {
		if err := decodeObject(req.OldObject.Raw, &old); err != nil {
			return "", err
		}
	}
	node := obj.Spec.EngineNodeID
	if node == "" || node == old.Spec.EngineNodeID || obj.Spec.DataEngine != dataplane.DataEngineV2 {
		return "", nil
	}
	upgrading, err := g.cfg.Upgrading.UpgradingNodes(ctx)
	if err != nil {
		return "", err
	}
	u, ok := upgrading[node]
	if !ok {
		return "", nil
	}
	return fmt.Sprintf("moving the engine of v2 volume %s to node %s (spec.engineNodeID) is refused: that node's v2 data engine is being upgraded by DataEngineUpgradeManager %s (%s); set it once that node's upgrade is over",
		obj.Name, node, u.Manager, u.State), nil
}

// snapshot refuses deleting a v2 volume's Snapshot object while the
// volume's target moves: a switch-over is under way, or its engine node
// differs from where its target runs (the switch-over is about to start).
func (g *Guard) snapshot(ctx context.Context, req *admissionv1.AdmissionRequest) (string, error) {
	var old longhorn.Snapshot
	if err := decodeObject(req.OldObject.Raw, &old); err != nil {
		return "", err
	}
	if old.DeletionTimestamp != nil || old.Spec.Volume == "" {
		return "", nil
	}
	v, err := g.cfg.Cluster.Volume(ctx, old.Spec.Volume)
	if errors.Is(err, dataplane.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read volume %s: %w", old.Spec.Volume, err)
	}
	if !Moving(v) {
		return "", nil
	}
	return fmt.Sprintf("deleting snapshot %s of v2 volume %s is refused while the volume's target moves (switchoverState %q, engine node %q, target on %q): "+
		"Longhorn's sync of the switch-over's new engine, whose snapshot list is still empty, would delete the snapshot from every replica; it passes once the move ended",
		old.Name, v.Name, v.Switchover, v.EngineHome(v.EngineNode), v.TargetNode), nil
}

// Moving reports whether an attached v2 volume's target is moving: a
// switch-over under way, or asked for (its engine node is not where its
// target runs), or not settled (two engines, or the initiator not on the
// only one). Snapshot objects of such a volume are kept.
func Moving(v dataplane.Volume) bool {
	if v.DataEngine != dataplane.DataEngineV2 || !v.Attached() {
		return false
	}
	return v.Switchover != dataplane.SwitchoverNone || v.EngineHome(v.EngineNode) != v.TargetNode || !v.TargetReady
}

// newTickets returns, sorted by id, the tickets of now that old does not
// have with the same node: the requests to attach somewhere new.
func newTickets(old, now map[string]longhorn.AttachmentTicket) []longhorn.AttachmentTicket {
	var out []longhorn.AttachmentTicket
	for id, t := range now {
		if o, ok := old[id]; ok && o.NodeID == t.NodeID {
			continue
		}
		if t.ID == "" {
			t.ID = id
		}
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b longhorn.AttachmentTicket) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// volume reads the volume a VolumeAttachment is for. One the cache does not
// have yet (created a moment ago) is taken as a detached v2 volume: guarded,
// since a refusal is retried once the cache has it, and Longhorn refuses to
// attach a volume it does not have anyway.
func (g *Guard) volume(ctx context.Context, name string) (dataplane.Volume, error) {
	v, err := g.cfg.Cluster.Volume(ctx, name)
	switch {
	case err == nil:
		return v, nil
	case errors.Is(err, dataplane.ErrNotFound):
		return dataplane.Volume{Name: name, DataEngine: dataplane.DataEngineV2}, nil
	default:
		return dataplane.Volume{}, fmt.Errorf("read volume %s: %w", name, err)
	}
}

func decodeObject(raw []byte, out any) error {
	if len(raw) == 0 {
		return fmt.Errorf("the review carries no object")
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("decode the object: %w", err)
	}
	return nil
}
