package webhooks

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// maxHead bounds what budgeted reads of a request before it takes its
// bytes: the API server writes the request's uid and namespace first,
// before the objects.
const maxHead = 16 << 10

// budgeted is a webhook's HTTP handler behind the budget: it reads the
// head of each AdmissionReview (its uid and namespace, maxHead bytes at
// most), takes the request's bytes (its Content-Length) from the
// namespace's share and the whole, and only then lets next read the rest
// and judge it; it gives them back when next has answered. So the bytes
// of every request, as read and decoded as judged, count, and a request
// that waits holds no more than its head. One that cannot take its bytes
// within the budget's wait is answered 429 Too Many Requests, in an
// AdmissionReview of its uid, without the rest being read.
//
// A nil budget takes nothing.
type budgeted struct {
	budget *Budget
	next   http.Handler
}

func (h budgeted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.budget == nil || r.Body == nil {
		h.next.ServeHTTP(w, r)
		return
	}
	var head bytes.Buffer
	uid, namespace, err := requestHead(io.TeeReader(io.LimitReader(r.Body, maxHead), &head))
	if err != nil {
		// Not the API server's: refused without reading on.
		http.Error(w, "an AdmissionReview whose request begins with its uid: "+err.Error(), http.StatusBadRequest)
		return
	}
	size := r.ContentLength
	if size < 0 {
		size = h.budget.Share() // unknown: as much as one may hold
	}
	release, err := h.budget.Take(r.Context(), namespace, size)
	if err != nil {
		resp := busy(err)
		resp.UID = types.UID(uid)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
			Response: &resp.AdmissionResponse,
		})
		return
	}
	defer release()
	r.Body = readCloser{io.MultiReader(&head, r.Body), r.Body}
	h.next.ServeHTTP(w, r)
}

type readCloser struct {
	io.Reader
	io.Closer
}

// requestHead reads an AdmissionReview up to its request's uid and
// namespace: namespace is "" when the request names none before its
// objects.
func requestHead(r io.Reader) (uid, namespace string, err error) {
	d := json.NewDecoder(r)
	if err := expectDelim(d, '{'); err != nil {
		return "", "", err
	}
	for d.More() {
		key, err := d.Token()
		if err != nil {
			return "", "", err
		}
		if key != "request" {
			if err := skipValue(d); err != nil {
				return "", "", err
			}
			continue
		}
		if err := expectDelim(d, '{'); err != nil {
			return "", "", err
		}
		for d.More() {
			field, err := d.Token()
			if err != nil {
				return "", "", err
			}
			switch field {
			case "uid", "namespace":
				var s string
				if err := d.Decode(&s); err != nil {
					return "", "", err
				}
				if field == "uid" {
					uid = s
				} else {
					namespace = s
				}
			case "object", "oldObject":
				// Past what comes first; no namespace named.
				if uid == "" {
					return "", "", errors.New("no uid before the objects")
				}
				return uid, namespace, nil
			default:
				if err := skipValue(d); err != nil {
					return "", "", err
				}
			}
			if uid != "" && namespace != "" {
				return uid, namespace, nil
			}
		}
		if uid == "" {
			return "", "", errors.New("no uid")
		}
		return uid, namespace, nil
	}
	return "", "", errors.New("no request")
}

func expectDelim(d *json.Decoder, want json.Delim) error {
	tok, err := d.Token()
	if err != nil {
		return err
	}
	if tok != want {
		return errors.New("want " + want.String())
	}
	return nil
}

// skipValue reads past one value of d, holding no more of it than a token.
func skipValue(d *json.Decoder) error {
	depth := 0
	for {
		tok, err := d.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return nil
		}
	}
}
