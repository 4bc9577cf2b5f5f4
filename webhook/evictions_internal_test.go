package webhook

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestDecideEviction(t *testing.T) {
	onN1 := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID("u1")}, Spec: corev1.PodSpec{NodeName: "n1"}}
	onN2 := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID("u1")}, Spec: corev1.PodSpec{NodeName: "n2"}}
	pending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID("u1")}}
	req := evictionRequest{node: "n1", pod: "apps/db-0", uid: "u1"}
	for _, tc := range []struct {
		name string
		req  evictionRequest
		pod  *corev1.Pod
		// refused is a part of the denial's message; "" means allowed.
		refused string
	}{
		{name: "a pod of its own node, by uid", req: req, pod: onN1},
		{name: "a pod gone: the API answers 404", req: req, pod: nil},
		{name: "a pod of another node", req: req, pod: onN2, refused: `switchback-worker of node "n1": evict pod apps/db-0 refused: it is bound to node "n2" (spec.nodeName)`},
		{name: "a pod bound to no node", req: req, pod: pending, refused: `it is bound to node "" (spec.nodeName)`},
		{name: "another pod of that name", req: evictionRequest{node: "n1", pod: "apps/db-0", uid: "u0"}, pod: onN1, refused: "the pod of that name has uid u1, not u0"},
		{name: "no uid precondition", req: evictionRequest{node: "n1", pod: "apps/db-0"}, pod: onN1, refused: "names no uid (deleteOptions.preconditions.uid)"},
		{name: "a token naming no node", req: evictionRequest{pod: "apps/db-0", uid: "u1"}, pod: onN1, refused: "the token is bound to no pod on a node (no authentication.kubernetes.io/node-name)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := decideEviction(tc.req, tc.pod)
			if tc.refused == "" {
				assert.True(t, v.allowed, v.message)
				return
			}
			assert.False(t, v.allowed)
			assert.Contains(t, v.message, tc.refused)
		})
	}
}
