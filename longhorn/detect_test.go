package longhorn

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/dataplane"
)

// v112Surface is the API surface of Longhorn v1.12.1.
func v112Surface() Surface {
	s := Surface{Version: "v1.12.1", Fields: map[string]bool{},
		Served: []string{"backups", "enginefrontends", "engines", "instancemanagers", "nodes", "replicas", "settings", "snapshots", "volumeattachments", "volumes"}}
	for _, r := range v112 {
		if r.field != "" {
			s.Fields[r.resource+" "+r.field] = true
		}
	}
	return s
}

// Each profile is told by its API surface: served resources, schema fields,
// and the version setting, which is reported but never decides.
func TestSurfacePlatform(t *testing.T) {
	older := v112Surface()
	older.Version = "v1.11.2"
	older.Served = []string{"engines", "instancemanagers", "nodes", "replicas", "settings", "snapshots", "volumeattachments", "volumes"}
	for _, f := range []string{"volumes spec.engineNodeID", "volumes status.currentEngineNodeID", "volumes status.switchoverState", "instancemanagers status.instanceEngineFrontends"} {
		older.Fields[f] = false
	}
	inPlaceSurface := v112Surface()
	inPlaceSurface.Version = "v1.13.0"
	inPlaceSurface.Served = append(inPlaceSurface.Served, "instancemanagerupgradecontrols", "instancemanagerupgrades")
	halfInPlace := v112Surface()
	halfInPlace.Served = append(halfInPlace.Served, "instancemanagerupgrades")
	noVersion := v112Surface()
	noVersion.Version = ""
	pruned := v112Surface()
	pruned.Fields["volumes spec.engineNodeID"] = false

	for _, tt := range []struct {
		name    string
		s       Surface
		allow   bool
		want    dataplane.Profile
		err     error
		message []string
	}{
		{name: "v1.12.1", s: v112Surface(), want: dataplane.ProfileV112},
		{name: "v1.12 with no version setting", s: noVersion, want: dataplane.ProfileV112},
		{name: "older Longhorn is refused, naming what it lacks", s: older, err: ErrUnsupportedLonghorn, message: []string{
			"Longhorn v1.11.2", "enginefrontends.longhorn.io is not served", "volumes.longhorn.io has no spec.engineNodeID",
			"volumes.longhorn.io has no status.switchoverState", "Longhorn v1.12 or later"}},
		{name: "a schema without spec.engineNodeID is refused", s: pruned, err: ErrUnsupportedLonghorn, message: []string{"volumes.longhorn.io has no spec.engineNodeID"}},
		{name: "no Longhorn at all", s: Surface{}, err: ErrUnsupportedLonghorn, message: []string{
			"(no current-longhorn-version setting)", "volumes.longhorn.io is not served"}},
		{name: "in-place without the opt-in is refused", s: inPlaceSurface, err: ErrExperimentalLonghorn, message: []string{
			"Longhorn v1.13.0 updates instance managers in place", "instancemanagerupgrades.longhorn.io", "--allow-experimental-longhorn"}},
		{name: "in-place with the opt-in", s: inPlaceSurface, allow: true, want: dataplane.ProfileInPlace},
		{name: "half of the in-place upgrader", s: halfInPlace, allow: true, err: ErrUnsupportedLonghorn, message: []string{"partial install"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := tt.s.Platform(tt.allow)
			if tt.err != nil {
				require.ErrorIs(t, err, tt.err)
				for _, m := range tt.message {
					assert.ErrorContains(t, err, m)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, p.Profile)
			assert.Equal(t, tt.s.Version, p.LonghornVersion)
			assert.NotEmpty(t, p.Evidence)
		})
	}
}
