package longhorn

// This file holds the bodies the actions write: JSON merge patches (RFC
// 7386) of the fields the adapter owns, and the Snapshot objects it creates.

import (
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchback-dev/switchback/dataplane"
)

// Fields the actions write; a written value that comes back otherwise
// means the apiserver pruned the field (see errFieldPruned).
const (
	fieldNodeAllowScheduling = "spec.allowScheduling"
	fieldVolumeEngineNode    = "spec.engineNodeID"
	fieldIMImage             = "spec.image"
)

// mergePatch marshals a JSON merge patch. The maps are built here from
// literals, so marshalling cannot fail.
func mergePatch(m map[string]any) []byte {
	b, err := json.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("longhorn: marshal patch: %v", err))
	}
	return b
}

// withResourceVersion adds a resourceVersion precondition to a merge patch:
// the apiserver refuses it with a Conflict if the object changed since it
// was read, so a decision taken on the object read holds when applied.
func withResourceVersion(m map[string]any, rv string) map[string]any {
	m["metadata"] = map[string]any{"resourceVersion": rv}
	return m
}

func patchAllowScheduling(allow bool) []byte {
	return mergePatch(map[string]any{"spec": map[string]any{"allowScheduling": allow}})
}

// patchEngineNode carries the resourceVersion the volume was seen at: the
// decision not to change it mid-switch must hold on the object patched.
func patchEngineNode(node, rv string) []byte {
	return mergePatch(withResourceVersion(map[string]any{"spec": map[string]any{"engineNodeID": node}}, rv))
}

// patchTargetAway sets the volume's TargetAwayAnnotation (nil removes it),
// on the volume as read: the record is written against the volume it was
// decided on.
func patchTargetAway(away *dataplane.TargetAway, rv string) []byte {
	var value any
	if away != nil {
		value = FormatTargetAway(*away)
	}
	return mergePatch(map[string]any{"metadata": map[string]any{"resourceVersion": rv,
		"annotations": map[string]any{TargetAwayAnnotation: value}}})
}

// patchMultipath sets the node's MultipathAnnotation (unknown removes it).
func patchMultipath(m dataplane.Multipath) []byte {
	var value any
	if m != dataplane.MultipathUnknown {
		value = string(m)
	}
	return mergePatch(map[string]any{"metadata": map[string]any{"annotations": map[string]any{MultipathAnnotation: value}}})
}

func patchIMImage(image, rv string) []byte {
	return mergePatch(withResourceVersion(map[string]any{"spec": map[string]any{"image": image}}, rv))
}

// patchFailReplica stamps a replica failed (failedAt and lastFailedAt),
// which keeps it from being counted healthy, and makes Longhorn take it out
// of its engine, until Longhorn decides to reuse it. Its instance keeps
// running (patchStopReplica stops it once no engine holds it). The
// resourceVersion makes the decision atomic.
func patchFailReplica(failedAt, rv string) []byte {
	return mergePatch(withResourceVersion(map[string]any{"spec": map[string]any{"failedAt": failedAt, "lastFailedAt": failedAt}}, rv))
}

// patchStopReplica stops a failed replica's instance; the resourceVersion
// makes it hold on the replica as read (still failed, not reused).
func patchStopReplica(rv string) []byte {
	return mergePatch(withResourceVersion(map[string]any{"spec": map[string]any{"desireState": StateStopped}}, rv))
}

// newSnapshot is the Snapshot object asking Longhorn for a snapshot named
// name of volume. The volume label is set here because Longhorn's webhook,
// which adds it, may not run first.
func newSnapshot(namespace, volume, name string) *Snapshot {
	return &Snapshot{
		ObjectMeta: metav1.ObjectMeta{
			Name:        SnapshotObjectName(volume, name),
			Namespace:   namespace,
			Labels:      map[string]string{VolumeLabel: volume},
			Annotations: map[string]string{SnapshotNameAnnotation: name},
		},
		Spec: SnapshotSpec{Volume: volume, CreateSnapshot: true},
	}
}
