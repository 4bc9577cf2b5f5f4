package benchenv

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestInt(t *testing.T) {
	cases := []struct {
		name, value string
		want        int
	}{
		{"unset", "", 7},
		{"set", "12", 12},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("BENCHENV_TEST", tc.value)
			assert.Equal(t, tc.want, Int(t, "BENCHENV_TEST", 7))
		})
	}
}
