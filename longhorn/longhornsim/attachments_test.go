package longhornsim

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/switchback-dev/switchback/longhorn"
)

// TestAttachDecision: Longhorn v1.12.1's VolumeAttachment controller as
// played: a volume stays while a ticket asks for its node, detaches when
// none does or when only snapshot and backup tickets hold it against a
// workload elsewhere, and attaches, once detached, where the ticket of the
// highest priority (then the smallest id) asks.
func TestAttachDecision(t *testing.T) {
	csi := func(node string) longhorn.AttachmentTicket {
		return longhorn.AttachmentTicket{Type: "csi-attacher", NodeID: node}
	}
	typed := func(typ, node string) longhorn.AttachmentTicket {
		return longhorn.AttachmentTicket{Type: typ, NodeID: node}
	}
	for _, tc := range []struct {
		name       string
		attached   string
		tickets    map[string]longhorn.AttachmentTicket
		wantDetach bool
		wantTo     string
		rwx        bool
	}{
		{"an RWX volume follows its share-manager's ticket, not its clients'", "n1",
			map[string]longhorn.AttachmentTicket{"csi-a": csi("n1"), "share-manager-controller-v": typed("share-manager-controller", "n2")}, true, "", true},
		{"an RWX volume detached: attached where its share-manager runs", "",
			map[string]longhorn.AttachmentTicket{"csi-a": csi("n1"), "share-manager-controller-v": typed("share-manager-controller", "n2")}, false, "n2", true},
		{"attached where its ticket asks: stays", "n1", map[string]longhorn.AttachmentTicket{"csi-a": csi("n1")}, false, "", false},
		{"a second workload ticket elsewhere does not move it", "n1", map[string]longhorn.AttachmentTicket{"csi-a": csi("n1"), "csi-b": csi("n2")}, false, "", false},
		{"its ticket gone: detached", "n1", map[string]longhorn.AttachmentTicket{"csi-b": csi("n2")}, true, "", false},
		{"no ticket at all: detached", "n1", nil, true, "", false},
		{"a snapshot's ticket yields to a workload elsewhere", "n1",
			map[string]longhorn.AttachmentTicket{"snapshot-controller-s": typed("snapshot-controller", "n1"), "csi-b": csi("n2")}, true, "", false},
		{"a rebuild's ticket does not yield", "n1",
			map[string]longhorn.AttachmentTicket{"volume-rebuilding-controller-v": typed("volume-rebuilding-controller", "n1"), "csi-b": csi("n2")}, false, "", false},
		{"detached: attached where the ticket asks", "", map[string]longhorn.AttachmentTicket{"csi-b": csi("n2")}, false, "n2", false},
		{"detached, two workload tickets: the smallest id", "", map[string]longhorn.AttachmentTicket{"csi-b": csi("n2"), "csi-a": csi("n3")}, false, "n3", false},
		{"detached: Longhorn's API before the CSI attacher", "", map[string]longhorn.AttachmentTicket{"csi-a": csi("n2"), "longhorn-api-x": typed("longhorn-api", "n4")}, false, "n4", false},
		{"detached, no ticket: stays detached", "", nil, false, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			detach, to := attachDecision(tc.attached, tc.tickets, tc.rwx)
			assert.Equal(t, tc.wantDetach, detach)
			assert.Equal(t, tc.wantTo, to)
		})
	}
}
