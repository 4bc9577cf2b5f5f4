package longhornsim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/longhorn"
)

// Longhorn's share-manager controller, played with
// Options.VolumeAttachments for the RWX volumes (VolumeSpec.ShareManager):
// the volume is attached where its share-manager pod runs, and the pod is
// scheduled like any other (`LM@v1.12.1:controller/share_manager_controller.go`).
// The controller's states (starting, running, error, stopping) and its
// backoff are not played: what the attachment sees of them is.

// The share-manager pod of a volume (`LM@v1.12.1:types/types.go`
// GetShareManagerPodNameFromShareManagerName, GetShareManagerLabels).
const (
	shareManagerPodPrefix  = "share-manager-"
	shareManagerComponent  = "longhorn.io/component"
	shareManagerVolumeName = "longhorn.io/share-manager"
)

// shareManagerTicketID is the ticket the controller keeps for the node of
// the volume's share-manager pod (GetAttachmentTicketID, SMC:520-567).
func shareManagerTicketID(volume string) string {
	return dataplane.AttacherShareManager + "-" + volume
}

// shareManagerRequired: a workload asks for the RWX volume, with a
// csi-attacher ticket (isShareManagerRequiredForVolume, SMC:483-517).
func shareManagerRequired(va *longhorn.VolumeAttachment) bool {
	for _, t := range va.Spec.AttachmentTickets {
		if t.Type == dataplane.AttacherCSI {
			return true
		}
	}
	return false
}

// shareManagers keeps, for every RWX volume with a VolumeAttachment, its
// share-manager pod and ticket as the controller does: while a workload
// asks for the volume, a pod exists (created when gone, SMC:908-922), and
// the ticket names the node the scheduler bound it to (SMC:520-567); a pod
// being deleted leaves the ticket where it was until a new pod is bound
// (SMC:953-966); once no workload asks, the ticket goes and the pod is
// deleted (SMC:683-690, 787-835).
func (m *Manager) shareManagers(ctx context.Context, vols []dataplane.Volume, vas map[string]*longhorn.VolumeAttachment) error {
	pods := byName[longhorn.Pod](m.shareManagerPods)
	var errs []error
	for _, v := range vols {
		va := vas[v.Name]
		if !v.ShareManager || va == nil {
			continue
		}
		pod := pods[shareManagerPodPrefix+v.Name]
		id := shareManagerTicketID(v.Name)
		have, hasTicket := va.Spec.AttachmentTickets[id]
		switch {
		case !shareManagerRequired(va):
			if hasTicket {
				errs = append(errs, m.patchTickets(ctx, va.Name, map[string]any{id: nil}))
			}
			if pod != nil && pod.DeletionTimestamp == nil {
				errs = append(errs, m.deleteShareManager(ctx, pod.Name))
			}
		case pod == nil:
			want := &longhorn.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: shareManagerPodPrefix + v.Name, Namespace: m.ns, Labels: map[string]string{
					shareManagerComponent: "share-manager", shareManagerVolumeName: v.Name, ManagedByLabel: m.ns}},
				Spec: longhorn.PodSpec{Containers: []longhorn.Container{{Name: "share-manager", Image: "longhornio/longhorn-share-manager"}}},
			}
			_, err := m.create(ctx, longhorn.PodsResource, "Pod", want, nil)
			errs = append(errs, err)
		case pod.DeletionTimestamp == nil && pod.Spec.NodeName != "" && (!hasTicket || have.NodeID != pod.Spec.NodeName):
			errs = append(errs, m.patchTickets(ctx, va.Name, map[string]any{id: map[string]any{
				"id": id, "type": dataplane.AttacherShareManager, "nodeID": pod.Spec.NodeName,
				"parameters": map[string]any{"disableFrontend": "false"}}}))
		}
	}
	return errors.Join(errs...)
}

// patchTickets merges change into a VolumeAttachment's tickets (nil
// removes one).
func (m *Manager) patchTickets(ctx context.Context, name string, change map[string]any) error {
	body, err := json.Marshal(map[string]any{"spec": map[string]any{"attachmentTickets": change}})
	if err != nil {
		return err
	}
	if _, err := m.ri(longhorn.VolumeAttachmentsResource).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patch the tickets of %s: %w", name, err)
	}
	return nil
}

func (m *Manager) deleteShareManager(ctx context.Context, name string) error {
	err := m.ri(longhorn.PodsResource).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete pod %s: %w", name, err)
	}
	return nil
}
