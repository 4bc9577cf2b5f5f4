package longhorn

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/switchback-dev/switchback/dataplane"
)

// Snapshot data integrity values (spec.snapshotDataIntegrity and the
// setting snapshot-data-integrity).
const (
	SnapshotDataIntegrityIgnored  = "ignored"
	SnapshotDataIntegrityDisabled = "disabled"
	// SettingSnapshotDataIntegrity is data-engine specific, a JSON object
	// of values by engine, default fast-check for both (LM@v1.12.1
	// types/setting.go:1504-1521).
	SettingSnapshotDataIntegrity = "snapshot-data-integrity"
	// volumeHeadSnapshot is the name Longhorn gives the head in an
	// engine's snapshot list; it is no snapshot.
	volumeHeadSnapshot = "volume-head"
)

func snapshotVolume(obj any) ([]string, error) {
	if s, ok := obj.(*Snapshot); ok {
		return distinct(s.Spec.Volume), nil
	}
	return nil, nil
}

// Snapshots implements dataplane.Reader from the Snapshot objects'
// cache: those not removed, oldest first, each named as Actions name it
// (the upgrade's by the name it asked for).
func (p *Plane) Snapshots(ctx context.Context, volume string) ([]dataplane.Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if _, ok := get[Volume](p.volumes, key(p.ns, volume)); !ok {
		return nil, notFound(fmt.Sprintf("longhorn volume %q", volume))
	}
	return toSnapshots(indexed[Snapshot](p.snapshots, byVolume, volume)), nil
}

// toSnapshots maps a volume's Snapshot objects: the chain Longhorn
// reports (its parent links name objects), oldest first, without the
// removed ones and the head.
func toSnapshots(objs []*Snapshot) []dataplane.Snapshot {
	names := map[string]string{}
	for _, s := range objs {
		names[s.Name] = SnapshotName(s)
	}
	out := make([]dataplane.Snapshot, 0, len(objs))
	for _, s := range objs {
		if s.DeletionTimestamp != nil || s.Status.MarkRemoved || s.Name == volumeHeadSnapshot {
			continue
		}
		created, err := time.Parse(time.RFC3339Nano, s.Status.CreationTime)
		if err != nil {
			created = s.CreationTimestamp.Time
		}
		parent := names[s.Status.Parent]
		if parent == "" && s.Status.Parent != volumeHeadSnapshot {
			parent = s.Status.Parent
		}
		out = append(out, dataplane.Snapshot{Name: names[s.Name], Parent: parent, UserCreated: s.Status.UserCreated,
			Created: created.UTC(), Size: s.Status.Size, Checksum: s.Status.Checksum})
	}
	slices.SortFunc(out, func(a, b dataplane.Snapshot) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// SnapshotName is the name of the snapshot a Snapshot object stands for:
// the one the upgrade asked for (SnapshotNameAnnotation), else the
// object's, which is the name Longhorn gives the snapshot.
func SnapshotName(s *Snapshot) string {
	if name := s.Annotations[SnapshotNameAnnotation]; name != "" {
		return name
	}
	return s.Name
}

// hashingOf is what v says of its snapshots' hashing. Hashing is disabled
// when the volume's snapshot data integrity resolves to disabled (its own
// value unless ignored, else the setting's v2 value: LM@v1.12.1
// datastore/longhorn.go:1203-1219), and when that value cannot be read,
// for Longhorn then fails every on-demand request's sync
// (controller/volume_controller.go:7387-7393).
func hashingOf(v *Volume, integrityV2 string) dataplane.SnapshotHashing {
	integrity := v.Spec.SnapshotDataIntegrity
	if integrity == SnapshotDataIntegrityIgnored {
		integrity = integrityV2
	}
	return dataplane.SnapshotHashing{
		Disabled:    integrity == SnapshotDataIntegrityDisabled || integrity == unreadableSetting,
		RequestedAt: v.Spec.SnapshotHashingRequestedAt,
		CompletedAt: v.Status.LastOnDemandSnapshotHashingCompleteAt,
	}
}

// unreadableSetting stands for a data-engine-specific setting whose value
// Longhorn cannot parse.
const unreadableSetting = "\x00unreadable"

// snapshotIntegrityV2 is the v2 value of snapshot-data-integrity as
// Longhorn reads it (GetSettingValueExistedByDataEngine, LM@v1.12.1
// datastore/longhorn.go:1092-1125): the default when the setting is absent.
func (p *Plane) snapshotIntegrityV2() string {
	s, ok := get[Setting](p.settings, key(p.ns, SettingSnapshotDataIntegrity))
	if !ok {
		return "fast-check"
	}
	var byEngine map[string]string
	if err := json.Unmarshal([]byte(s.Value), &byEngine); err != nil {
		return unreadableSetting
	}
	v, ok := byEngine[dataplane.DataEngineV2]
	if !ok {
		return unreadableSetting
	}
	return v
}

// RequestSnapshotHashing implements dataplane.SnapshotHasher: the
// volume's spec.snapshotHashingRequestedAt set to at. Longhorn's volume
// webhook refuses a new request while one is in progress
// (webhook/resources/volume/validator.go:1062-1082): refused here first,
// by name.
func (p *Plane) RequestSnapshotHashing(ctx context.Context, volume string, at time.Time) error {
	value := at.UTC().Truncate(time.Second).Format(time.RFC3339)
	return p.updateSynced(ctx, p.volumes, volume, "set spec.snapshotHashingRequestedAt="+value, func(u *unstructured.Unstructured) ([]byte, error) {
		var v Volume
		if err := FromUnstructured(u, &v); err != nil {
			return nil, err
		}
		h := hashingOf(&v, "")
		switch {
		case h.RequestedAt == value:
			return nil, nil
		case h.InProgress():
			return nil, fmt.Errorf("%w: the previous snapshot hashing request (%s) is still in progress", dataplane.ErrRefused, h.RequestedAt)
		}
		return mergePatch(withResourceVersion(map[string]any{"spec": map[string]any{"snapshotHashingRequestedAt": value}}, u.GetResourceVersion())), nil
	})
}
