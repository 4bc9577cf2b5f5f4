package projector

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
)

// Objects are the custom resources a manager's history describes, as the
// projector writes them: kind, metadata, spec and status. What only the
// live objects know (resourceVersion, generation and the observedGeneration
// fields, timestamps the apiserver sets) stays empty.
type Objects struct {
	Manager *v1beta2.DataEngineUpgradeManager
	// NodeUpgrades are the manager's NodeDataEngineUpgrades, by node name.
	NodeUpgrades []*v1beta2.NodeDataEngineUpgrade
}

// ReplayObjects folds the history of the manager ref up to the stream
// sequence until (0 = the stream's end) exactly as the projector does live,
// and returns the objects it would have written by then: what `switchback
// replay -o json` prints, shaped like `kubectl get -o json`.
func ReplayObjects(ctx context.Context, store *eventstore.Store, ref events.ManagerRef, until uint64) (Objects, error) {
	v := newView(ref)
	if err := v.catchUp(ctx, store, until, func(step) {}); err != nil {
		return Objects{}, err
	}
	return v.objects(), nil
}

// managerSpec is the spec m was requested with, as the apiserver serves it
// (the policies defaulted).
func managerSpec(m manager.State) v1beta2.DataEngineUpgradeManagerSpec {
	policy := v1beta2.InitiatorPolicy(m.InitiatorPolicy)
	if policy == "" {
		policy = v1beta2.InitiatorPolicyWait
	}
	replicas := v1beta2.ReplicaPolicy(m.ReplicaPolicy)
	if replicas == "" {
		replicas = v1beta2.ReplicaPolicyRebuild
	}
	return v1beta2.DataEngineUpgradeManagerSpec{DataEngine: v1beta2.DataEngineType(m.DataEngine), Nodes: m.RequestedNodes,
		AllowNodesWithoutReplicaScheduling: m.AllowNodesWithoutReplicaScheduling, InitiatorPolicy: policy, ReplicaPolicy: replicas}
}

func (v *view) objects() Objects {
	m := v.Manager
	out := Objects{Manager: &v1beta2.DataEngineUpgradeManager{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1beta2.SchemeGroupVersion.String(), Kind: "DataEngineUpgradeManager"},
		ObjectMeta: metav1.ObjectMeta{Name: v.ref.Name, Namespace: v.ref.Namespace, UID: types.UID(v.ref.UID)},
		Spec:       managerSpec(m),
		Status:     renderManager(v, 0),
	}}
	for _, n := range v.nodeUpgrades() {
		obj := newNodeUpgrade(v, n, NodeUpgradeName(v.ref.Name, n))
		obj.TypeMeta = metav1.TypeMeta{APIVersion: v1beta2.SchemeGroupVersion.String(), Kind: "NodeDataEngineUpgrade"}
		obj.Status = renderNode(v, n, 0)
		out.NodeUpgrades = append(out.NodeUpgrades, obj)
	}
	return out
}
