package hostkernel

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/dataplane"
)

func TestNVMeMultipath(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string // path under the root: content ("" = a directory)
		want    dataplane.Multipath
		wantErr string
	}{
		{name: "on", files: map[string]string{multipathParam: "Y\n"}, want: dataplane.MultipathOn},
		{name: "off", files: map[string]string{multipathParam: "N\n"}, want: dataplane.MultipathOff},
		{name: "built without native multipath", files: map[string]string{"module/nvme_core/parameters/io_timeout": "30\n"}, want: dataplane.MultipathOff},
		{name: "nvme_core not loaded", files: map[string]string{"module/loop": ""}, wantErr: "nvme_core module is not loaded"},
		{name: "no sysfs", wantErr: "sysfs is not readable"},
		{name: "garbage", files: map[string]string{multipathParam: "maybe"}, wantErr: `reads "maybe"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for p, content := range tt.files {
				full := filepath.Join(root, p)
				if content == "" {
					require.NoError(t, os.MkdirAll(full, 0o755))
					continue
				}
				require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
				require.NoError(t, os.WriteFile(full, []byte(content), 0o444))
			}
			got, err := NVMeMultipath(root)
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
				assert.Equal(t, dataplane.MultipathUnknown, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
