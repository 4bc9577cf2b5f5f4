package longhorn

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/switchback-dev/switchback/dataplane"
)

// ErrFieldUnsupported is matched when the apiserver drops a field an action
// writes (a Longhorn whose schema lacks spec.engineNodeID, say): the live
// upgrade cannot work on it (README.md, version matrix). It also matches
// dataplane.ErrRefused: retrying cannot help.
var ErrFieldUnsupported = fmt.Errorf("%w: field not in the installed Longhorn's schema", dataplane.ErrRefused)

// errNotV2 is the refusal to act on a v1 object: the upgrade touches v2
// resources only, and the adapter enforces it whatever the caller asks.
var errNotV2 = fmt.Errorf("%w: not a v2 data engine object; only v2 resources are touched", dataplane.ErrRefused)

// apiError wraps an apiserver error with what was being done, mapping
// NotFound to dataplane.ErrNotFound and a request the apiserver (or
// Longhorn's admission webhook) judges invalid to dataplane.ErrRefused.
// Forbidden stays unmapped: missing RBAC is fixable, not a refusal.
func apiError(err error, what string) error {
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%s: %w (%w)", what, dataplane.ErrNotFound, err)
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return fmt.Errorf("%s: %w (%w)", what, dataplane.ErrRefused, err)
	default:
		return fmt.Errorf("%s: %w", what, err)
	}
}

// notFound is the error for an object missing from the cache.
func notFound(what string) error {
	return fmt.Errorf("%s: %w", what, dataplane.ErrNotFound)
}

// errFieldPruned reports a write whose field did not stick.
func errFieldPruned(object, field string) error {
	return fmt.Errorf("%s: %s was dropped by the apiserver: %w", object, field, ErrFieldUnsupported)
}
