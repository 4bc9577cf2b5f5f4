package longhornsim

import (
	"cmp"
	"context"
	"errors"
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/longhorn"
)

// Longhorn's VolumeAttachment controller, played with
// Options.VolumeAttachments: every volume has its VolumeAttachment, and a
// volume is attached where its tickets ask (docs/longhorn-evidence.md §3.4,
// `LM@v1.12.1:controller/volume_attachment_controller.go`). The CSI side,
// writing the csi-attacher tickets of the pods a kubelet runs, is the test
// harness's (test/harness/kubelets).

// attacherPriority is Longhorn's GetAttacherPriorityLevel
// (`LM@v1.12.1:k8s/pkg/apis/longhorn/v1beta2/volumeattachment.go` :57-70,
// :87-116); any other type is 0.
var attacherPriority = map[string]int{
	"volume-restore-controller":    2000,
	"volume-expansion-controller":  2000,
	dataplane.AttacherLonghornAPI:  1000,
	dataplane.AttacherCSI:          900,
	"salvage-controller":           900,
	"share-manager-controller":     900,
	"snapshot-controller":          800,
	"backup-controller":            800,
	"volume-clone-controller":      800,
	"volume-eviction-controller":   800,
	"bim-ds-controller":            800,
	"volume-rebuilding-controller": 800,
}

// interruptible are the tickets a workload ticket elsewhere interrupts
// (hasUninterruptibleTicket, VAC:669-685; a clone's only once copied,
// which the simulator never is).
var interruptible = map[string]bool{"snapshot-controller": true, "backup-controller": true}

// workloadTicket are the types hasWorkloadTicket counts (VAC:687-704).
var workloadTicket = map[string]bool{dataplane.AttacherCSI: true, dataplane.AttacherLonghornAPI: true, "share-manager-controller": true}

// attachDecision is what the VolumeAttachment controller does with a
// volume attached to attached ("" when fully detached) and tickets: detach
// it, or attach it to attachTo. A move is always a full detach, then an
// attach. The csi-attacher tickets of an RWX volume are not its to handle
// (isCSIAttacherTicketOfRegularRWXVolume, VAC:638-645): the share-manager
// controller's ticket stands for them.
func attachDecision(attached string, tickets map[string]longhorn.AttachmentTicket, rwx bool) (detach bool, attachTo string) {
	if rwx {
		tickets = maps.Clone(tickets)
		maps.DeleteFunc(tickets, func(_ string, t longhorn.AttachmentTicket) bool { return t.Type == dataplane.AttacherCSI })
	}
	if attached != "" {
		// shouldDoDetach (VAC:623-667): no ticket for the current node, or
		// only interruptible ones there and a workload ticket elsewhere.
		current, uninterruptible, workloadElsewhere := 0, false, false
		for _, t := range tickets {
			if t.NodeID == attached {
				current++
				uninterruptible = uninterruptible || !interruptible[t.Type]
			} else if workloadTicket[t.Type] {
				workloadElsewhere = true
			}
		}
		return current == 0 || (!uninterruptible && workloadElsewhere), ""
	}
	// selectAttachmentTicketToAttach (VAC:731-787): the highest priority,
	// then the smallest id.
	var best *longhorn.AttachmentTicket
	for id, t := range tickets {
		t.ID = id
		if best == nil || cmp.Or(cmp.Compare(attacherPriority[best.Type], attacherPriority[t.Type]), cmp.Compare(t.ID, best.ID)) < 0 {
			best = &t
		}
	}
	if best == nil {
		return false, ""
	}
	return false, best.NodeID
}

// attachAsTicketsSay creates the VolumeAttachment of every simulated
// volume that has none (the volume controller's job, VC:730-752), and
// attaches or detaches each volume as its tickets decide.
func (m *Manager) attachAsTicketsSay(ctx context.Context) error {
	if m.attachments == nil {
		return nil
	}
	vols, err := m.sim.Volumes(ctx)
	if err != nil {
		return err
	}
	vas := map[string]*longhorn.VolumeAttachment{}
	for _, va := range all[longhorn.VolumeAttachment](m.attachments) {
		vas[cmp.Or(va.Spec.Volume, va.Name)] = va
	}
	errs := []error{m.shareManagers(ctx, vols, vas)}
	for _, v := range vols {
		va := vas[v.Name]
		if va == nil {
			want := &longhorn.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: v.Name, Namespace: m.ns,
				Labels: map[string]string{"longhornvolume": v.Name}}, Spec: longhorn.VolumeAttachmentSpec{Volume: v.Name}}
			_, err := m.create(ctx, longhorn.VolumeAttachmentsResource, "VolumeAttachment", want, nil)
			errs = append(errs, err)
			continue
		}
		switch detach, to := attachDecision(v.AttachedNode, va.Spec.AttachmentTickets, v.ShareManager); {
		case detach:
			m.act("DetachVolume", v.Name, m.sim.DetachVolume(v.Name))
		case to != "":
			m.act("AttachVolume", v.Name, m.sim.AttachVolume(v.Name, to))
		}
	}
	return errors.Join(errs...)
}
