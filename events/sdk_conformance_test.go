package events_test

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/binding/spec"
	"github.com/cloudevents/sdk-go/v2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/events"
)

// sdkWriter collects what the CloudEvents SDK's own binary-mode writer emits.
type sdkWriter struct {
	hdr  map[string]string
	data []byte
}

func (w *sdkWriter) Start(context.Context) error { return nil }
func (w *sdkWriter) End(context.Context) error   { return nil }
func (w *sdkWriter) SetData(r io.Reader) (err error) {
	w.data, err = io.ReadAll(r)
	return err
}
func (w *sdkWriter) SetAttribute(a spec.Attribute, v any) error {
	s, err := types.Format(v)
	if a.Kind() == spec.DataContentType {
		w.hdr["content-type"] = s
	} else {
		w.hdr["ce-"+a.Name()] = s
	}
	return err
}
func (w *sdkWriter) SetExtension(name string, v any) error {
	s, err := types.Format(v)
	w.hdr["ce-"+strings.ToLower(name)] = s
	return err
}

// Encode writes headers directly for speed; this pins it to exactly what the
// SDK's binary-mode encoding would produce for the same event.
func TestEncodeMatchesSDKBinaryMode(t *testing.T) {
	for typ, env := range samples() {
		t.Run(string(typ), func(t *testing.T) {
			ce, err := env.ToCloudEvent()
			require.NoError(t, err)
			w := &sdkWriter{hdr: map[string]string{}}
			_, err = binding.Write(context.Background(), binding.ToMessage(&ce), nil, w)
			require.NoError(t, err)

			msg, err := events.Encode(env)
			require.NoError(t, err)
			got := map[string]string{}
			for k, v := range msg.Header {
				if k != events.MsgIDHeader {
					got[k] = v[0]
				}
			}
			assert.Equal(t, w.hdr, got)
			assert.Equal(t, w.data, msg.Data)
		})
	}
}

// Decode reads headers directly; this pins it to the SDK's event model: the
// CloudEvent read back from a message equals the one the SDK built.
func TestDecodeMatchesSDKBinaryMode(t *testing.T) {
	for typ, env := range samples() {
		t.Run(string(typ), func(t *testing.T) {
			want, err := env.ToCloudEvent()
			require.NoError(t, err)
			msg, err := events.Encode(env)
			require.NoError(t, err)
			got, err := events.CloudEventFromMessage(msg.Header, msg.Data)
			require.NoError(t, err)
			assert.Equal(t, want.Context.AsV1(), got.Context.AsV1())
			assert.Equal(t, want.Data(), got.Data())
			assert.NoError(t, got.Validate())
		})
	}
}
