package projector

import (
	"fmt"
	"reflect"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchback-dev/switchback/api/v1beta2"
)

// DiffManager lists the top-level fields of a manager's live status that
// differ from the projection's (want), ignoring what only the live object
// knows: its generation, and when each condition last changed.
func DiffManager(want, got v1beta2.DataEngineUpgradeManagerStatus) []string {
	want.ObservedGeneration, got.ObservedGeneration = 0, 0
	want.Conditions, got.Conditions = normalize(want.Conditions), normalize(got.Conditions)
	return diffFields(want, got)
}

// DiffNode is DiffManager for a NodeDataEngineUpgrade's status.
func DiffNode(want, got v1beta2.NodeDataEngineUpgradeStatus) []string {
	want.ObservedGeneration, got.ObservedGeneration = 0, 0
	want.Conditions, got.Conditions = normalize(want.Conditions), normalize(got.Conditions)
	return diffFields(want, got)
}

// normalize drops from conditions what only the live object knows, sorted
// by type.
func normalize(cs []metav1.Condition) []metav1.Condition {
	out := make([]metav1.Condition, len(cs))
	for i, c := range cs {
		c.LastTransitionTime, c.ObservedGeneration = metav1.Time{}, 0
		out[i] = c
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out
}

// diffFields lists the top-level fields of two structs that differ.
func diffFields(want, got any) []string {
	wv, gv := reflect.ValueOf(want), reflect.ValueOf(got)
	var out []string
	for i := range wv.NumField() {
		if !reflect.DeepEqual(wv.Field(i).Interface(), gv.Field(i).Interface()) {
			out = append(out, fmt.Sprintf("%s: stream says %v, status says %v", wv.Type().Field(i).Name, wv.Field(i).Interface(), gv.Field(i).Interface()))
		}
	}
	return out
}
