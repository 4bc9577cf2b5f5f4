// Package historystorage keeps Switchback's history off the storage it
// upgrades. The bundled NATS servers keep the event stream on persistent
// volumes, and on most Longhorn clusters the default StorageClass is
// Longhorn's: the history of an upgrade would then sit on the volumes that
// upgrade moves and restarts, so a failure of the upgrade could take its own
// record (and the way back) with it. The controller refuses to start on such
// volumes unless told it is allowed (docs/upgrade-flows.md, "Where the
// history lives").
package historystorage

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// LonghornProvisioner is the CSI driver of Longhorn's StorageClasses.
const LonghornProvisioner = "driver.longhorn.io"

// DefaultSelector selects the bundled NATS servers' volumes (deploy/nats).
const DefaultSelector = "app.kubernetes.io/name=switchback-nats"

// defaultClassAnnotation marks the cluster's default StorageClass, which a
// claim naming none gets.
const defaultClassAnnotation = "storageclass.kubernetes.io/is-default-class"

// Volume is one of the history's volumes and where it is provisioned.
type Volume struct {
	// Claim is the PersistentVolumeClaim's name.
	Claim string
	// StorageClass is its class ("" when it names none and the cluster has
	// no default).
	StorageClass string
	// Provisioner is the class's provisioner.
	Provisioner string
	// DataEngine is Longhorn's dataEngine parameter of the class (v1 when
	// unset), for Longhorn classes.
	DataEngine string
}

// OnLonghorn reports whether the volume is Longhorn's.
func (v Volume) OnLonghorn() bool { return v.Provisioner == LonghornProvisioner }

// Find lists the claims selector selects in namespace with their classes.
func Find(ctx context.Context, cs kubernetes.Interface, namespace, selector string) ([]Volume, error) {
	claims, err := cs.CoreV1().PersistentVolumeClaims(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("historystorage: list the history's volumes (%s in %s): %w", selector, namespace, err)
	}
	if len(claims.Items) == 0 {
		return nil, nil
	}
	classes, err := cs.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("historystorage: list the StorageClasses: %w", err)
	}
	return volumes(claims.Items, classes.Items), nil
}

// volumes joins claims with their classes.
func volumes(claims []corev1.PersistentVolumeClaim, classes []storagev1.StorageClass) []Volume {
	byName := map[string]storagev1.StorageClass{}
	def := ""
	for _, c := range classes {
		byName[c.Name] = c
		if c.Annotations[defaultClassAnnotation] == "true" {
			def = c.Name
		}
	}
	var out []Volume
	for _, pvc := range claims {
		v := Volume{Claim: pvc.Name, StorageClass: def}
		if pvc.Spec.StorageClassName != nil {
			v.StorageClass = *pvc.Spec.StorageClassName
		}
		if c, ok := byName[v.StorageClass]; ok {
			v.Provisioner = c.Provisioner
			if v.OnLonghorn() {
				v.DataEngine = c.Parameters["dataEngine"]
				if v.DataEngine == "" {
					v.DataEngine = "v1"
				}
			}
		}
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b Volume) int { return strings.Compare(a.Claim, b.Claim) })
	return out
}

// Check refuses volumes on Longhorn, naming each and saying why and what to
// do; allowed lets them be (the operator's explicit choice).
func Check(vols []Volume, allowed bool) error {
	var on []string
	for _, v := range vols {
		if v.OnLonghorn() {
			on = append(on, fmt.Sprintf("%s (StorageClass %s, Longhorn %s)", v.Claim, v.StorageClass, v.DataEngine))
		}
	}
	if len(on) == 0 || allowed {
		return nil
	}
	return fmt.Errorf("the upgrade's history is on Longhorn volumes: %s. An upgrade of Longhorn's data engine must not keep its own record "+
		"on the storage it upgrades: give the NATS servers a StorageClass that is not Longhorn's (local storage, or the cloud's disks; "+
		"deploy/nats's volumeClaimTemplates), or start the controller with --allow-history-on-longhorn if you accept the risk "+
		"(a v1 Longhorn volume is not moved by a v2 upgrade, but it depends on the Longhorn being upgraded)", strings.Join(on, ", "))
}
