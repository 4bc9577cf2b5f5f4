package webhook_test

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/switchback-dev/switchback/webhook"
)

// TestHandlerRejectsBadRequests covers what is not a well-formed review: an
// HTTP error with a message, never a panic and never an AdmissionReview.
func TestHandlerRejectsBadRequests(t *testing.T) {
	valid := func(t *testing.T) []byte { return reviewBody(t, request(t, manager("v2"))) }
	tests := []struct {
		name        string
		method      string
		contentType string
		body        func(t *testing.T) []byte
		code        int
		message     string
	}{
		{name: "empty body", body: func(*testing.T) []byte { return nil },
			code: http.StatusBadRequest, message: "malformed AdmissionReview: unexpected end of JSON input"},
		{name: "not JSON", body: func(*testing.T) []byte { return []byte("<xml/>") },
			code: http.StatusBadRequest, message: "malformed AdmissionReview: invalid character '<'"},
		{name: "JSON, not an object", body: func(*testing.T) []byte { return []byte(`[1,2]`) },
			code: http.StatusBadRequest, message: "malformed AdmissionReview: json: cannot unmarshal array"},
		{name: "truncated", body: func(t *testing.T) []byte { b := valid(t); return b[:len(b)/2] },
			code: http.StatusBadRequest, message: "malformed AdmissionReview: unexpected end of JSON input"},
		{name: "admission.k8s.io/v1beta1", body: func(t *testing.T) []byte {
			return bytes.Replace(valid(t), []byte(`"admission.k8s.io/v1"`), []byte(`"admission.k8s.io/v1beta1"`), 1)
		}, code: http.StatusBadRequest, message: `apiVersion "admission.k8s.io/v1beta1", kind "AdmissionReview": want admission.k8s.io/v1 AdmissionReview`},
		{name: "wrong kind of review", body: func(t *testing.T) []byte {
			return bytes.Replace(valid(t), []byte(`"kind":"AdmissionReview"`), []byte(`"kind":"Status"`), 1)
		}, code: http.StatusBadRequest, message: `kind "Status"`},
		{name: "no request", body: func(*testing.T) []byte {
			return []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`)
		}, code: http.StatusBadRequest, message: "malformed AdmissionReview: no request"},
		{name: "request without uid", body: func(t *testing.T) []byte {
			req := request(t, manager("v2"))
			req.UID = ""
			return reviewBody(t, req)
		}, code: http.StatusBadRequest, message: "malformed AdmissionReview: request without uid"},
		{name: "request of the wrong type", body: func(*testing.T) []byte {
			return []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":"yes"}`)
		}, code: http.StatusBadRequest, message: "malformed AdmissionReview: json: cannot unmarshal string"},
		{name: "too large", body: func(*testing.T) []byte {
			return append([]byte(`{"apiVersion":"`), bytes.Repeat([]byte("a"), webhook.MaxReviewBytes)...)
		}, code: http.StatusRequestEntityTooLarge, message: "AdmissionReview larger than"},
		{name: "GET", method: http.MethodGet, body: valid,
			code: http.StatusMethodNotAllowed, message: "method GET not allowed"},
		{name: "not JSON content", contentType: "application/yaml", body: valid,
			code: http.StatusUnsupportedMediaType, message: `content type "application/yaml" not supported`},
	}
	h := webhook.NewHandler(webhook.ServerConfig{Admitter: newAdmitter(t, threeNodes(t), noActive)})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := tt.method
			if method == "" {
				method = http.MethodPost
			}
			ct := tt.contentType
			if ct == "" {
				ct = "application/json"
			}
			r := httptest.NewRequest(method, webhook.ValidatePath, bytes.NewReader(tt.body(t)))
			r.Header.Set("Content-Type", ct)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			assert.Equal(t, tt.code, w.Code)
			assert.Contains(t, w.Body.String(), tt.message)
			assert.True(t, strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain"))
		})
	}
}

func TestHandlerAcceptsJSONWithCharset(t *testing.T) {
	h := webhook.NewHandler(webhook.ServerConfig{Admitter: newAdmitter(t, threeNodes(t), noActive)})
	r := httptest.NewRequest(http.MethodPost, webhook.ValidatePath, bytes.NewReader(reviewBody(t, request(t, manager("v2")))))
	r.Header.Set("Content-Type", "application/json; charset=utf-8")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	assert.True(t, decodeAnswer(t, w).Allowed)
}

func TestHealthz(t *testing.T) {
	h := webhook.NewHandler(webhook.ServerConfig{Admitter: newAdmitter(t, threeNodes(t), noActive)})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, webhook.HealthzPath, nil))
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "ok", w.Body.String())
}

func TestDecodeReviewErrorsAreMalformed(t *testing.T) {
	for _, body := range []string{"", "{", `{"apiVersion":"v1"}`, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`} {
		_, err := webhook.DecodeReview([]byte(body))
		assert.True(t, errors.Is(err, webhook.ErrMalformedReview), "%q: %v", body, err)
	}
}

func TestEncodeResponseEchoesTheUID(t *testing.T) {
	req := request(t, manager("v2"))
	body, err := webhook.EncodeResponse(req, &admissionv1.AdmissionResponse{UID: "something else", Allowed: true})
	require.NoError(t, err)
	assert.Contains(t, string(body), `"uid":"`+requestUID+`"`)
	assert.Contains(t, string(body), `"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1"`)
}
