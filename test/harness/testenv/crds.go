package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// crdGVR is the resource of CustomResourceDefinitions. They are handled as
// unstructured objects so that this package needs no dependency on
// k8s.io/apiextensions-apiserver.
var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// ReadCRDs parses every CustomResourceDefinition in the .yaml/.yml/.json
// files of dir (multi-document files allowed). Other kinds, such as the
// kustomization.yaml next to them, are ignored.
func ReadCRDs(dir string) ([]*unstructured.Unstructured, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read CRD dir: %w", err)
	}
	var crds []*unstructured.Unstructured
	for _, entry := range entries {
		ext := filepath.Ext(entry.Name())
		if entry.IsDir() || (ext != ".yaml" && ext != ".yml" && ext != ".json") {
			continue
		}
		path := filepath.Join(dir, entry.Name())
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var obj map[string]any
			if err := dec.Decode(&obj); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return nil, fmt.Errorf("decode %s: %w", path, err)
			}
			u := &unstructured.Unstructured{Object: obj}
			if obj == nil || u.GetKind() != "CustomResourceDefinition" {
				continue
			}
			crds = append(crds, u)
		}
	}
	if len(crds) == 0 {
		return nil, fmt.Errorf("no CustomResourceDefinition found in %s", dir)
	}
	return crds, nil
}

// InstallCRDs creates (or updates) the CRDs found in dir and waits until each
// is Established with its names accepted and its resources are listed by
// discovery: kubectl resolves kinds and short names through discovery, so
// Established alone is not enough for `kubectl apply` to work at once.
func InstallCRDs(ctx context.Context, cfg *rest.Config, dir string) error {
	crds, err := ReadCRDs(dir)
	if err != nil {
		return err
	}
	// CRDs written from real ones draw the apiserver's warnings (int64
	// formats, short finalizer names) exactly as the real ones do.
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = rest.NoWarnings{}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("discovery client: %w", err)
	}
	api := client.Resource(crdGVR)
	for _, crd := range crds {
		if _, err := api.Create(ctx, crd, metav1.CreateOptions{}); err != nil {
			if !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("create CRD %s: %w", crd.GetName(), err)
			}
			existing, err := api.Get(ctx, crd.GetName(), metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("get CRD %s: %w", crd.GetName(), err)
			}
			crd.SetResourceVersion(existing.GetResourceVersion())
			if _, err := api.Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("update CRD %s: %w", crd.GetName(), err)
			}
		}
	}
	for _, crd := range crds {
		if err := waitEstablished(ctx, api, crd.GetName()); err != nil {
			return err
		}
		if err := waitServed(ctx, disco, crd); err != nil {
			return err
		}
	}
	return nil
}

func waitEstablished(ctx context.Context, api dynamic.NamespaceableResourceInterface, name string) error {
	var last string
	err := poll(ctx, 50*time.Millisecond, func() (bool, error) {
		u, err := api.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, fmt.Errorf("get CRD %s: %w", name, err)
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		status := map[string]string{}
		for _, c := range conds {
			m, _ := c.(map[string]any)
			t, _ := m["type"].(string)
			s, _ := m["status"].(string)
			status[t] = s
			if t == "NamesAccepted" && s == "False" {
				msg, _ := m["message"].(string)
				return false, fmt.Errorf("CRD %s names not accepted: %s", name, msg)
			}
		}
		last = fmt.Sprintf("%v", status)
		return status["Established"] == "True" && status["NamesAccepted"] == "True", nil
	})
	if err != nil {
		return fmt.Errorf("wait for CRD %s to be Established (last conditions %s): %w", name, last, err)
	}
	return nil
}

// waitServed waits until discovery lists every plural of the CRD's served
// versions.
func waitServed(ctx context.Context, disco discovery.DiscoveryInterface, crd *unstructured.Unstructured) error {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	var served []string
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if ok, _ := m["served"].(bool); ok {
			name, _ := m["name"].(string)
			served = append(served, name)
		}
	}
	sort.Strings(served)
	for _, version := range served {
		gv := group + "/" + version
		err := poll(ctx, 50*time.Millisecond, func() (bool, error) {
			list, err := disco.ServerResourcesForGroupVersion(gv)
			if err != nil {
				// NotFound is the normal answer until the group appears.
				if apierrors.IsNotFound(err) {
					return false, nil
				}
				return false, err
			}
			for _, r := range list.APIResources {
				if r.Name == plural {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("wait for %s in discovery of %s: %w", plural, gv, err)
		}
	}
	return nil
}

// poll calls cond every interval until it reports done, fails, or ctx ends.
func poll(ctx context.Context, interval time.Duration, cond func() (bool, error)) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		done, err := cond()
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
