package webhook_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/switchback-dev/switchback/webhook"
)

// seedReviews are bodies worth mutating: valid reviews for each outcome and
// near misses. The committed corpus in testdata/fuzz holds more.
func seedReviews(f *testing.F) [][]byte {
	update := request(f, manager("v2", "n1"))
	update.Operation = admissionv1.Update
	noObject := request(f, manager("v2"))
	noObject.Object.Raw = nil
	return [][]byte{
		reviewBody(f, request(f, manager("v2"))),
		reviewBody(f, request(f, manager("v2", "n1", "ghost"))),
		reviewBody(f, request(f, manager("v1"))),
		reviewBody(f, update),
		reviewBody(f, noObject),
		[]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"apps","version":"v1","kind":"Deployment"},"operation":"CREATE","object":{}}}`),
		[]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"longhorn.io","version":"v1beta2","kind":"DataEngineUpgradeManager"},"operation":"CREATE","object":{"spec":{"nodes":[null,""],"dataEngine":7}}}}`),
		[]byte(`{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"u"}}`),
		[]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":null}`),
		[]byte(`null`),
		[]byte(``),
	}
}

// FuzzDecodeReview: whatever the body, DecodeReview either fails with
// ErrMalformedReview or returns a review with a request and a uid that can be
// answered.
func FuzzDecodeReview(f *testing.F) {
	for _, s := range seedReviews(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		review, err := webhook.DecodeReview(body)
		if err != nil {
			if !errors.Is(err, webhook.ErrMalformedReview) {
				t.Fatalf("error not marked malformed: %v", err)
			}
			return
		}
		if review.Request == nil || review.Request.UID == "" {
			t.Fatalf("accepted a review without request uid: %s", body)
		}
		out, err := webhook.EncodeResponse(review.Request, &admissionv1.AdmissionResponse{Allowed: true})
		if err != nil {
			t.Fatalf("encode answer: %v", err)
		}
		var back admissionv1.AdmissionReview
		if err := json.Unmarshal(out, &back); err != nil || back.Response == nil || back.Response.UID != review.Request.UID {
			t.Fatalf("answer does not carry the uid: %s (%v)", out, err)
		}
	})
}

// FuzzValidate sends arbitrary bodies through the HTTP handler (without the
// server's panic recovery, so a panic fails the fuzz): the answer is a 400 or
// 413 for a malformed review, else a 200 AdmissionReview answering the
// request's uid, and a denial always says why.
func FuzzValidate(f *testing.F) {
	for _, s := range seedReviews(f) {
		f.Add(s)
	}
	h := webhook.NewHandler(webhook.ServerConfig{Admitter: newAdmitter(f, threeNodes(f), activeNamed("longhorn-system/other"))})
	f.Fuzz(func(t *testing.T, body []byte) {
		w := post(h, body)
		switch w.Code {
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			if w.Body.Len() == 0 {
				t.Fatalf("%d without a message", w.Code)
			}
			return
		case http.StatusOK:
		default:
			t.Fatalf("unexpected status %d: %s", w.Code, w.Body.String())
		}
		req, err := webhook.DecodeReview(body)
		if err != nil {
			t.Fatalf("answered 200 to a malformed review: %v", err)
		}
		var review admissionv1.AdmissionReview
		if err := json.Unmarshal(w.Body.Bytes(), &review); err != nil {
			t.Fatalf("answer is not JSON: %v", err)
		}
		if review.Response == nil || review.Response.UID != req.Request.UID {
			t.Fatalf("answer does not carry the request uid: %s", w.Body.String())
		}
		if !review.Response.Allowed && (review.Response.Result == nil || review.Response.Result.Message == "") {
			t.Fatalf("denial without a message: %s", w.Body.String())
		}
	})
}

// FuzzGuard sends arbitrary reviews to the guard's path: never a panic, a
// 200 answers the request's uid, and a denial is a 403 with a message; what
// the guard cannot read it allows (it fails open).
func FuzzGuard(f *testing.F) {
	for _, s := range []string{
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"longhorn.io","version":"v1beta2","kind":"VolumeAttachment"},"operation":"UPDATE","object":{"spec":{"volume":"pvc-v2","attachmentTickets":{"csi-n2":{"id":"csi-n2","type":"csi-attacher","nodeID":"n2"}}}},"oldObject":{"spec":{"volume":"pvc-v2"}}}}`,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"longhorn.io","version":"v1beta2","kind":"Volume"},"operation":"UPDATE","object":{"metadata":{"name":"pvc-v2"},"spec":{"dataEngine":"v2","engineNodeID":"n2"}},"oldObject":{"spec":{"dataEngine":"v2"}}}}`,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"longhorn.io","version":"v1beta2","kind":"Volume"},"operation":"UPDATE","object":{"spec":{"engineNodeID":7}}}}`,
	} {
		f.Add([]byte(s))
	}
	g, err := webhook.NewGuard(webhook.GuardConfig{Upgrading: upgradingFunc(n2Upgrading), Cluster: guardCluster(f), Trusted: []string{worker}})
	if err != nil {
		f.Fatal(err)
	}
	h := webhook.NewHandler(webhook.ServerConfig{Admitter: newAdmitter(f, threeNodes(f), noActive), Guard: g})
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest(http.MethodPost, webhook.GuardPath, bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			if w.Code != http.StatusBadRequest && w.Code != http.StatusRequestEntityTooLarge {
				t.Fatalf("unexpected status %d: %s", w.Code, w.Body.String())
			}
			return
		}
		req, err := webhook.DecodeReview(body)
		if err != nil {
			t.Fatalf("answered 200 to a malformed review: %v", err)
		}
		var review admissionv1.AdmissionReview
		if err := json.Unmarshal(w.Body.Bytes(), &review); err != nil || review.Response == nil || review.Response.UID != req.Request.UID {
			t.Fatalf("answer does not carry the request uid: %s (%v)", w.Body.String(), err)
		}
		if !review.Response.Allowed && (review.Response.Result == nil || review.Response.Result.Code != http.StatusForbidden || review.Response.Result.Message == "") {
			t.Fatalf("a denial is a 403 with a message: %s", w.Body.String())
		}
	})
}
