package longhornsim

import (
	"context"
	"errors"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/switchback-dev/switchback/longhorn"
)

// keepWhole brings gvr's objects in line with want: each written whole
// (see writeWhole), those have holds and want does not removed.
func (m *Manager) keepWhole(ctx context.Context, gvr schema.GroupVersionResource, want []*whole, have map[string]*whole) error {
	var errs []error
	wanted := map[string]bool{}
	for _, w := range want {
		wanted[w.name] = true
		errs = append(errs, m.writeWhole(ctx, w, have[w.name]))
	}
	for name, h := range have {
		if !wanted[name] {
			errs = append(errs, m.remove(ctx, gvr, name, h.deleting))
		}
	}
	return errors.Join(errs...)
}

// wholes maps listed objects to what writeWhole compares.
func wholes[T any, PT interface {
	*T
	metav1.Object
}](objs map[string]PT, f func(PT) *whole) map[string]*whole {
	out := make(map[string]*whole, len(objs))
	for name, o := range objs {
		w := f(o)
		w.deleting = o.GetDeletionTimestamp() != nil
		out[name] = w
	}
	return out
}

// whole is an object whose spec and status are Longhorn's own (an engine,
// an EngineFrontend): kept as rendered, each replaced whole.
type whole struct {
	gvr          schema.GroupVersionResource
	kind, name   string
	obj          any // the object, to create it
	spec, status any
	deleting     bool // as listed: being deleted already
}

func engineWhole(e *longhorn.Engine) *whole {
	if e == nil {
		return nil
	}
	return &whole{gvr: longhorn.EnginesResource, kind: longhorn.KindEngine, name: e.Name, obj: e, spec: e.Spec, status: e.Status}
}

func frontendWhole(ef *longhorn.EngineFrontend) *whole {
	if ef == nil {
		return nil
	}
	return &whole{gvr: longhorn.EngineFrontendsResource, kind: longhorn.KindEngineFrontend, name: ef.Name, obj: ef, spec: ef.Spec, status: ef.Status}
}

// writeWhole creates want when missing (have nil), else replaces its status
// and its spec where they differ from have.
func (m *Manager) writeWhole(ctx context.Context, want, have *whole) error {
	if have == nil {
		_, err := m.create(ctx, want.gvr, want.kind, want.obj, want.status)
		return err
	}
	var errs []error
	if !apiequality.Semantic.DeepEqual(have.status, want.status) {
		errs = append(errs, m.putStatus(ctx, want.gvr, want.name, want.status))
	}
	if !apiequality.Semantic.DeepEqual(have.spec, want.spec) {
		errs = append(errs, m.replace(ctx, want.gvr, want.name, "/spec", want.spec, ""))
	}
	return errors.Join(errs...)
}
