package longhorn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"

	"github.com/switchback-dev/switchback/dataplane"
)

// This file finds out which Longhorn the adapter talks to, from the API
// itself: the resources the apiserver serves in longhorn.io/v1beta2, the
// fields of their published schemas, and the current-longhorn-version
// setting. Gathering (ReadSurface) is apart from deciding
// (Surface.Platform), so each profile's detection is a table test over a
// Surface. The version matrix is in README.md.

// ErrUnsupportedLonghorn is matched when the cluster's Longhorn lacks what
// the upgrade drives.
var ErrUnsupportedLonghorn = errors.New("unsupported Longhorn")

// ErrExperimentalLonghorn is matched when the cluster's Longhorn is of an
// experimental profile and the operator did not opt in.
var ErrExperimentalLonghorn = errors.New("experimental Longhorn profile")

// requirement is one thing of the API the v1.12 profile needs.
type requirement struct {
	resource string // plural in longhorn.io/v1beta2
	kind     string
	field    string // dotted path in the kind's schema; "" for the resource alone
}

func (r requirement) String() string {
	if r.field == "" {
		return r.resource + "." + GroupVersion.Group + " is not served"
	}
	return fmt.Sprintf("%s.%s has no %s", r.resource, GroupVersion.Group, r.field)
}

// v112 is what the v1.12 profile reads and writes beyond what every Longhorn
// has: the engine switch-over of a v2 volume, its EngineFrontends, the IMs'
// instance maps and replica scheduling.
var v112 = []requirement{
	{resource: "nodes", kind: KindNode, field: "spec.allowScheduling"},
	{resource: "volumes", kind: KindVolume, field: "spec.engineNodeID"},
	{resource: "volumes", kind: KindVolume, field: "status.currentEngineNodeID"},
	{resource: "volumes", kind: KindVolume, field: "status.switchoverState"},
	{resource: "engines", kind: KindEngine, field: "status.storageIP"},
	{resource: "replicas", kind: KindReplica, field: "spec.failedAt"},
	{resource: "instancemanagers", kind: KindInstanceManager, field: "status.instanceEngineFrontends"},
	{resource: "settings", kind: KindSetting},
	{resource: "snapshots", kind: KindSnapshot},
	{resource: "enginefrontends", kind: KindEngineFrontend, field: "spec.engineName"},
	{resource: "enginefrontends", kind: KindEngineFrontend, field: "status.targetIP"},
	{resource: "enginefrontends", kind: KindEngineFrontend, field: "status.switchoverPhase"},
}

// inPlace are the resources of Longhorn's own instance-manager upgrader,
// which ships with the IM controller that updates a running IM's image.
var inPlace = []string{InstanceManagerUpgradesResource.Resource, InstanceManagerUpgradeControlsResource.Resource}

// Surface is what the apiserver shows of Longhorn.
type Surface struct {
	// Served are the resources of longhorn.io/v1beta2 the apiserver serves.
	Served []string
	// Fields holds, for each requirement "resource field", whether the
	// resource's published schema has the field.
	Fields map[string]bool
	// Version is the current-longhorn-version setting, "" when absent.
	Version string
}

func (s Surface) serves(resource string) bool { return slices.Contains(s.Served, resource) }

// missing lists the v1.12 requirements the surface does not meet.
func (s Surface) missing() []string {
	var out []string
	for _, r := range v112 {
		switch {
		case !s.serves(r.resource):
			if !slices.Contains(out, (requirement{resource: r.resource}).String()) {
				out = append(out, requirement{resource: r.resource}.String())
			}
		case r.field != "" && !s.Fields[r.resource+" "+r.field]:
			out = append(out, r.String())
		}
	}
	return out
}

// Platform decides the profile of the surface. A Longhorn lacking a v1.12
// requirement is refused naming its version and what it lacks; one with the
// in-place upgrader is ProfileInPlace, refused unless allowExperimental.
func (s Surface) Platform(allowExperimental bool) (dataplane.Platform, error) {
	version := s.Version
	if version == "" {
		version = "(no current-longhorn-version setting)"
	}
	if miss := s.missing(); len(miss) > 0 {
		return dataplane.Platform{}, fmt.Errorf("%w: Longhorn %s: %s; Switchback drives Longhorn v1.12 or later, where a v2 volume's target moves with spec.engineNodeID while its EngineFrontend stays",
			ErrUnsupportedLonghorn, version, strings.Join(miss, "; "))
	}
	p := dataplane.Platform{Profile: dataplane.ProfileV112, LonghornVersion: s.Version,
		Evidence: "enginefrontends.longhorn.io served; volumes.longhorn.io has spec.engineNodeID, status.currentEngineNodeID and status.switchoverState"}
	if slices.ContainsFunc(inPlace, s.serves) {
		if !slices.ContainsFunc(inPlace, func(r string) bool { return !s.serves(r) }) {
			p.Profile = dataplane.ProfileInPlace
			p.Evidence += "; instancemanagerupgrades.longhorn.io and instancemanagerupgradecontrols.longhorn.io served (in-place instance-manager updates)"
		} else {
			return dataplane.Platform{}, fmt.Errorf("%w: Longhorn %s serves only one of %s: a partial install of Longhorn's own instance-manager upgrader",
				ErrUnsupportedLonghorn, version, strings.Join(inPlace, ", "))
		}
	}
	if p.Profile.Experimental() && !allowExperimental {
		return dataplane.Platform{}, fmt.Errorf("%w: Longhorn %s updates instance managers in place (%s): Switchback's support for it is experimental, since how attached volumes' initiators survive the update is not established on any release; opt in with --allow-experimental-longhorn",
			ErrExperimentalLonghorn, version, p.Evidence)
	}
	return p, nil
}

// ReadSurface reads the surface: discovery for the served resources, the
// OpenAPI v3 document of longhorn.io/v1beta2 for the fields (both readable
// by any authenticated client), and the version setting in namespace.
func ReadSurface(ctx context.Context, disc discovery.DiscoveryInterface, dyn dynamic.Interface, namespace string) (Surface, error) {
	var s Surface
	list, err := disc.ServerResourcesForGroupVersion(GroupVersion.String())
	switch {
	case apierrors.IsNotFound(err):
		return s, nil // no Longhorn at all: Platform says what is missing
	case err != nil:
		return s, fmt.Errorf("longhorn: discover %s: %w", GroupVersion, err)
	}
	for _, r := range list.APIResources {
		if !strings.Contains(r.Name, "/") {
			s.Served = append(s.Served, r.Name)
		}
	}
	slices.Sort(s.Served)
	if s.Fields, err = readFields(disc); err != nil {
		return s, err
	}
	u, err := dyn.Resource(SettingsResource).Namespace(namespace).Get(ctx, SettingCurrentLonghornVersion, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return s, fmt.Errorf("longhorn: read setting %s in %s: %w", SettingCurrentLonghornVersion, namespace, err)
	default:
		var set Setting
		if err := FromUnstructured(u, &set); err != nil {
			return s, fmt.Errorf("longhorn: read setting %s in %s: %w", SettingCurrentLonghornVersion, namespace, err)
		}
		s.Version = set.Value
	}
	return s, nil
}

// readFields looks up every requirement's field in the published schemas.
func readFields(disc discovery.DiscoveryInterface) (map[string]bool, error) {
	paths, err := disc.OpenAPIV3().Paths()
	if err != nil {
		return nil, fmt.Errorf("longhorn: read the OpenAPI v3 index: %w", err)
	}
	gv, ok := paths["apis/"+GroupVersion.String()]
	if !ok {
		return map[string]bool{}, nil
	}
	raw, err := gv.Schema("application/json")
	if err != nil {
		return nil, fmt.Errorf("longhorn: read the OpenAPI v3 schema of %s: %w", GroupVersion, err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]schemaNode `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("longhorn: decode the OpenAPI v3 schema of %s: %w", GroupVersion, err)
	}
	byKind := map[string]schemaNode{}
	for _, sch := range doc.Components.Schemas {
		for _, gvk := range sch.GVK {
			if gvk.Group == GroupVersion.Group && gvk.Version == GroupVersion.Version {
				byKind[gvk.Kind] = sch
			}
		}
	}
	out := map[string]bool{}
	for _, r := range v112 {
		if r.field != "" {
			out[r.resource+" "+r.field] = byKind[r.kind].has(strings.Split(r.field, "."))
		}
	}
	return out, nil
}

// schemaNode is the part of an OpenAPI v3 schema read here.
type schemaNode struct {
	Properties map[string]schemaNode `json:"properties"`
	GVK        []struct {
		Group   string `json:"group"`
		Version string `json:"version"`
		Kind    string `json:"kind"`
	} `json:"x-kubernetes-group-version-kind"`
}

func (n schemaNode) has(path []string) bool {
	if len(path) == 0 {
		return true
	}
	child, ok := n.Properties[path[0]]
	return ok && child.has(path[1:])
}
