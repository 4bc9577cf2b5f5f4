package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of the Switchback resources.
const GroupName = "longhorn.io"

// Version is the API version of the types in this package.
const Version = "v1beta2"

// SchemeGroupVersion is the group and version used to register these types.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: Version}

var (
	// SchemeBuilder collects the functions that add this package's types to
	// a scheme. It is exported so that aggregating packages can chain it.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this group-version to a scheme, so that
	// typed clients and serializers know them.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Resource takes an unqualified resource name (e.g. "dataengineupgrademanagers")
// and returns it qualified with this package's group.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

// Resource names, as served by the apiserver; handy for dynamic clients and
// RBAC rules.
const (
	// DataEngineUpgradeManagerResource is the plural resource name of
	// DataEngineUpgradeManager.
	DataEngineUpgradeManagerResource = "dataengineupgrademanagers"
	// NodeDataEngineUpgradeResource is the plural resource name of
	// NodeDataEngineUpgrade.
	NodeDataEngineUpgradeResource = "nodedataengineupgrades"
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&DataEngineUpgradeManager{},
		&DataEngineUpgradeManagerList{},
		&NodeDataEngineUpgrade{},
		&NodeDataEngineUpgradeList{},
	)
	// The meta types (ListOptions, Status, ...) must be known for this
	// group-version too, or a typed REST client cannot encode list options.
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
