package deploy

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestInstallOwnsNothingOfLonghorns: `kubectl delete -k deploy/` deletes
// what deploy/ renders, so it must render nothing Longhorn owns: no
// Namespace (longhorn-system is Longhorn's; deleting it would delete
// Longhorn), no object of Longhorn's own kinds, and only objects named for
// Switchback (besides the two CRDs, which are Switchback's).
func TestInstallOwnsNothingOfLonghorns(t *testing.T) {
	for name, dir := range map[string]string{"default": repoPath(t, "deploy"), insecureNATS: overlay(t, []string{insecureNATS}, "")} {
		t.Run(name, func(t *testing.T) {
			for _, u := range render(t, dir) {
				assert.NotEqual(t, "Namespace", u.GetKind(), "%s: a Namespace", u.GetName())
				gv := u.GetAPIVersion()
				if strings.HasPrefix(gv, "longhorn.io/") {
					t.Errorf("%s %s: an object of Longhorn's API group", u.GetKind(), u.GetName())
				}
				if u.GetKind() == "CustomResourceDefinition" {
					assert.Contains(t, []string{"dataengineupgrademanagers.longhorn.io", "nodedataengineupgrades.longhorn.io"}, u.GetName())
					continue
				}
				assert.True(t, strings.HasPrefix(u.GetName(), "switchback"), "%s %s is named for Switchback", u.GetKind(), u.GetName())
			}
		})
	}
}
