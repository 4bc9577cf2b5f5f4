package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ErrMalformedReview is matched (errors.Is) by every DecodeReview error: the
// body is not an admission.k8s.io/v1 AdmissionReview carrying a request the
// webhook can answer. The server answers it with 400 Bad Request.
var ErrMalformedReview = errors.New("malformed AdmissionReview")

// AdmissionReview's apiVersion and kind: the only version the webhook
// configuration asks the apiserver to send (admissionReviewVersions: [v1]).
const (
	reviewAPIVersion = "admission.k8s.io/v1"
	reviewKind       = "AdmissionReview"
)

// DecodeReview parses an AdmissionReview request body. It checks what the
// answer depends on: the apiVersion and kind (a v1beta1 review would expect
// a v1beta1 answer), and a request with a uid (the response must echo it).
// The object itself is decoded by the admission step, which can answer a
// bad object with a denial instead of a 400.
func DecodeReview(body []byte) (*admissionv1.AdmissionReview, error) {
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformedReview, err)
	}
	if review.APIVersion != reviewAPIVersion || review.Kind != reviewKind {
		return nil, fmt.Errorf("%w: apiVersion %q, kind %q: want %s %s",
			ErrMalformedReview, review.APIVersion, review.Kind, reviewAPIVersion, reviewKind)
	}
	if review.Request == nil {
		return nil, fmt.Errorf("%w: no request", ErrMalformedReview)
	}
	if review.Request.UID == "" {
		return nil, fmt.Errorf("%w: request without uid", ErrMalformedReview)
	}
	return &review, nil
}

// EncodeResponse builds the body answering req with resp: an AdmissionReview
// of the same version whose response carries the request's uid, which the
// apiserver uses to match the answer.
func EncodeResponse(req *admissionv1.AdmissionRequest, resp *admissionv1.AdmissionResponse) ([]byte, error) {
	out := *resp
	out.UID = req.UID
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: reviewAPIVersion, Kind: reviewKind},
		Response: &out,
	}
	body, err := json.Marshal(&review)
	if err != nil {
		return nil, fmt.Errorf("webhook: encode AdmissionReview response: %w", err)
	}
	return body, nil
}

// allow is an allowing response.
func allow() *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Allowed: true}
}

// deny is a denying response with an HTTP-like code (the apiserver turns it
// into the status of the user's request), a reason and a message; causes
// name the fields at fault for clients that read them.
func deny(code int32, reason metav1.StatusReason, message string, causes ...metav1.StatusCause) *admissionv1.AdmissionResponse {
	st := &metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    code,
		Reason:  reason,
		Message: message,
	}
	if len(causes) > 0 {
		st.Details = &metav1.StatusDetails{Causes: causes}
	}
	return &admissionv1.AdmissionResponse{Allowed: false, Result: st}
}

// denyBadRequest denies a review whose request cannot be evaluated (wrong
// kind, missing or undecodable object). The review itself was well formed,
// so the HTTP answer is 200 and the refusal is in the response.
func denyBadRequest(message string) *admissionv1.AdmissionResponse {
	return deny(http.StatusBadRequest, metav1.StatusReasonBadRequest, message)
}
