package longhorn

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/switchback-dev/switchback/dataplane"
)

var _ dataplane.ReplicaCounter = (*Plane)(nil)

// SetReplicaCount implements dataplane.ReplicaCounter: the volume's
// spec.numberOfReplicas, spec.replicaAutoBalance and spec.dataLocality,
// in one patch on the volume as read. Longhorn's volume controller adds a
// replica for a raised count at its next pass (replenishReplicas) and, for
// a lowered one, deletes an extra healthy replica only with data locality
// or auto-balance on (controller/volume_controller.go:1321-1356).
func (p *Plane) SetReplicaCount(ctx context.Context, volume string, spec dataplane.ReplicaSpec) error {
	if spec.NumberOfReplicas < 1 {
		return fmt.Errorf("volume %s: numberOfReplicas %d: %w", volume, spec.NumberOfReplicas, dataplane.ErrRefused)
	}
	action := fmt.Sprintf("set spec.numberOfReplicas=%d replicaAutoBalance=%s dataLocality=%s", spec.NumberOfReplicas, spec.ReplicaAutoBalance, spec.DataLocality)
	return p.updateSynced(ctx, p.volumes, volume, action, func(u *unstructured.Unstructured) ([]byte, error) {
		var v Volume
		if err := FromUnstructured(u, &v); err != nil {
			return nil, err
		}
		patch := map[string]any{}
		if v.Spec.NumberOfReplicas != spec.NumberOfReplicas {
			patch["numberOfReplicas"] = spec.NumberOfReplicas
		}
		if spec.ReplicaAutoBalance != "" && v.Spec.ReplicaAutoBalance != spec.ReplicaAutoBalance {
			patch["replicaAutoBalance"] = spec.ReplicaAutoBalance
		}
		if spec.DataLocality != "" && v.Spec.DataLocality != spec.DataLocality {
			patch["dataLocality"] = spec.DataLocality
		}
		if len(patch) == 0 {
			return nil, nil
		}
		return mergePatch(withResourceVersion(map[string]any{"spec": patch}, u.GetResourceVersion())), nil
	})
}

// DeleteReplica implements dataplane.ReplicaCounter: the replica object,
// checked to be the volume's. Longhorn's replica webhook refuses deleting
// a volume's last healthy replica; its replica controller takes it out of
// the engine before it stops the instance.
func (p *Plane) DeleteReplica(ctx context.Context, volume, replica string) error {
	return p.deleteObject(ctx, ReplicasResource, p.replicas, replica, "delete (volume "+volume+")", "", func(u *unstructured.Unstructured) error {
		var r Replica
		if err := FromUnstructured(u, &r); err != nil {
			return err
		}
		return replicaOf(&r, volume)
	})
}
