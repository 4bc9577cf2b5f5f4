package testenv

import (
	"context"
	"fmt"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// PodToken returns a token of serviceAccount in namespace as the kubelet
// projects it into a pod on node: from the TokenRequest API, bound to a Pod
// with that nodeName (so that it carries the pod's node, as
// authentication.kubernetes.io/node-name), valid for audience. The
// ServiceAccount, the Node and the Pod are created when missing (no kubelet
// runs: the Pod only has to exist). The apiserver is shared by a package's
// tests: remove deletes the Pod and a Node it created (which ends the
// token's validity), leaving the namespace and the ServiceAccount.
func (e *Env) PodToken(ctx context.Context, namespace, serviceAccount, node, audience string) (token string, remove func(), err error) {
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return "", nil, err
	}
	var undo []func()
	remove = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	defer func() {
		if err != nil {
			remove()
		}
	}()
	create := func(what string, err error) error {
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("testenv: pod token: create %s: %w", what, err)
		}
		return nil
	}
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	if err := create("namespace "+namespace, err); err != nil {
		return "", nil, err
	}
	_, err = cs.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: serviceAccount}}, metav1.CreateOptions{})
	if err := create("service account "+serviceAccount, err); err != nil {
		return "", nil, err
	}
	_, err = cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{})
	if err == nil {
		undo = append(undo, func() { _ = cs.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })
	}
	if err := create("node "+node, err); err != nil {
		return "", nil, err
	}
	pod, err := cs.CoreV1().Pods(namespace).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: serviceAccount + "-" + node + "-"},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: serviceAccount,
			Containers: []corev1.Container{{Name: "main", Image: "testenv/pod-token"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", nil, fmt.Errorf("testenv: pod token: create a pod on %s: %w", node, err)
	}
	undo = append(undo, func() { _ = cs.CoreV1().Pods(namespace).Delete(context.Background(), pod.Name, metav1.DeleteOptions{}) })
	expiry := int64(3600)
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, serviceAccount, &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{
		Audiences: []string{audience}, ExpirationSeconds: &expiry,
		BoundObjectRef: &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		return "", nil, fmt.Errorf("testenv: pod token: token request for %s/%s on %s: %w", namespace, serviceAccount, node, err)
	}
	return tr.Status.Token, remove, nil
}
