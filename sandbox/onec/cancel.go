package onec

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/idemgate/idemgate/sandbox"
)

// Invoice cancellation over the integration HTTP service (our contract, as
// the invoices are): a cancelling document of its own, never a deletion.
//
//	POST <base>/hs/integration/invoices/{ref}/cancel
//	Idempotency-Key: <key>            (≤ 100 characters)
//	{"reason": "…"}                  (optional, at most 1024 characters)
//
//	201 {"key","ref","invoice_ref","number","replayed":false}   the cancelling document
//	200 …"replayed":true                                         same key, same body
//	409 {"error":"idempotency_key_reused"}                       same key, another body or invoice
//	409 {"error":"already_cancelled","cancel_ref":…}             cancelled under another key
//	422 {"error":"validation","detail":…}                        no such invoice
//
//	GET <base>/hs/integration/cancellations/{key}
//	200 {"key","ref","invoice_ref","number","state":"done","found_by"} | 404 {"error":"not_found"}
//
// As for invoices, when the register has no record for the key (a
// connector dropped the header), GET answers with the oldest cancelling
// document whose reason carries the marker "[op:<key>]" ("found_by":
// "marker", "key":"").
//
// The key is unique per infobase as for invoices (its own register, under
// a managed lock); the cancelling document's Ref is UUIDv5 of the key. The
// invoice stays, posted, with its cancelled mark: the register of
// settlements nets it out. Each cancelling document is one ledger effect
// of kind "invoice_cancel" under the key the client sent.

// cancellation is a cancelling document.
type cancellation struct {
	Ref        string
	Number     string
	Key        string
	InvoiceRef string
	Reason     string
	bodyHash   string
}

// EffectInvoiceCancel is the ledger kind of a cancelling document;
// EffectInvoice that of an invoice.
const (
	EffectInvoice       = "invoice"
	EffectInvoiceCancel = "invoice_cancel"
)

type cancelRequest struct {
	Reason string `json:"reason,omitempty"`
}

func (s *Server) cancelInvoice(w http.ResponseWriter, r *http.Request) {
	ref := r.PathValue("ref")
	sent := r.Header.Get("Idempotency-Key")
	key := sent
	if sandbox.KeyIgnored(r.Context()) {
		key = ""
	}
	body, err := sandbox.ReadBody(r, 1<<16)
	if err != nil {
		sandbox.WriteJSON(w, http.StatusBadRequest, "", map[string]string{"error": "validation", "detail": "Тело запроса слишком велико"})
		return
	}
	var q cancelRequest
	if len(strings.TrimSpace(string(body))) > 0 {
		dec := json.NewDecoder(strings.NewReader(string(body)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&q); err != nil {
			sandbox.WriteJSON(w, http.StatusBadRequest, "", map[string]string{"error": "validation", "detail": "Тело запроса не является JSON отмены"})
			return
		}
	}
	switch {
	case len(key) > MaxKeyLen:
		sandbox.WriteJSON(w, http.StatusBadRequest, "", map[string]string{"error": "validation", "detail": "Idempotency-Key длиннее 100 символов"})
		return
	case len([]rune(q.Reason)) > 1024:
		sandbox.WriteJSON(w, http.StatusUnprocessableEntity, "", map[string]string{"error": "validation", "detail": "Причина отмены длиннее 1024 символов"})
		return
	}
	h := hashOf(ref, q)
	if key != "" {
		unlock := s.lockKey("cancel:" + key)
		defer unlock()
		s.mu.Lock()
		c := s.cancels[key]
		s.mu.Unlock()
		if c != nil {
			if c.bodyHash != h {
				sandbox.WriteJSON(w, http.StatusConflict, "", map[string]string{"error": "idempotency_key_reused", "detail": "payload hash differs"})
				return
			}
			sandbox.WriteJSON(w, http.StatusOK, "", cancelAnswer(c, true))
			return
		}
	}
	// The invoice's own lock: two cancellations of one invoice under
	// different keys are serialised, and the second is refused.
	unlock := s.lockKey("invoice:" + ref)
	defer unlock()
	s.mu.Lock()
	inv := s.byRef(ref)
	switch {
	case inv == nil:
		s.mu.Unlock()
		sandbox.WriteJSON(w, http.StatusUnprocessableEntity, "", map[string]string{"error": "validation", "detail": "Счёт не найден"})
		return
	case inv.CancelledBy != "":
		by := inv.CancelledBy
		s.mu.Unlock()
		sandbox.WriteJSON(w, http.StatusConflict, "", map[string]string{"error": "already_cancelled", "cancel_ref": by})
		return
	}
	n := len(s.cancelDocs) + 1
	c := &cancellation{
		Ref:        uuid.NewSHA1(refNamespace, []byte("cancel-"+strconv.Itoa(n))).String(),
		Number:     fmt.Sprintf("ОТМ-%06d", n),
		Key:        key,
		InvoiceRef: ref,
		Reason:     q.Reason,
		bodyHash:   h,
	}
	if key != "" {
		c.Ref = uuid.NewSHA1(refNamespace, []byte("cancel:"+key)).String()
		s.cancels[key] = c
	}
	s.cancelDocs = append(s.cancelDocs, c)
	inv.CancelledBy = c.Ref
	inv.Version++
	s.mu.Unlock()
	s.Record(r.Context(), sent, EffectInvoiceCancel, c.Ref)
	sandbox.WriteJSON(w, http.StatusCreated, "", cancelAnswer(c, false))
}

// byRef returns the invoice with that Ref, or nil; s.mu is held.
func (s *Server) byRef(ref string) *document {
	for _, d := range s.docs {
		if d.Ref == ref && !d.Deleted {
			return d
		}
	}
	return nil
}

func hashOf(ref string, q cancelRequest) string {
	b, _ := json.Marshal(struct {
		Ref string `json:"ref"`
		cancelRequest
	}{ref, q})
	return sandboxHash(b)
}

func sandboxHash(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func cancelAnswer(c *cancellation, replayed bool) map[string]any {
	return map[string]any{"key": c.Key, "ref": c.Ref, "invoice_ref": c.InvoiceRef, "number": c.Number, "replayed": replayed}
}

// getCancellation answers by the cancellations' key register.
func (s *Server) getCancellation(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	s.mu.Lock()
	c, by := s.cancels[key], "register"
	if c == nil {
		mark := "[op:" + key + "]"
		for _, d := range s.cancelDocs {
			if strings.Contains(d.Reason, mark) {
				c, by = d, "marker"
				break
			}
		}
	}
	s.mu.Unlock()
	if c == nil {
		sandbox.WriteJSON(w, http.StatusNotFound, "", map[string]string{"error": "not_found"})
		return
	}
	a := cancelAnswer(c, false)
	delete(a, "replayed")
	a["state"] = "done"
	a["found_by"] = by
	sandbox.WriteJSON(w, http.StatusOK, "", a)
}

// Cancelled reports whether the invoice with that Ref is cancelled, and by
// which cancelling document.
func (s *Server) Cancelled(ref string) (cancelRef string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d := s.byRef(ref); d != nil && d.CancelledBy != "" {
		return d.CancelledBy, true
	}
	return "", false
}

// SeedInvoice puts a posted invoice with the given Ref in the base, as if
// it had been made there before (by hand, or by another integration): no
// ledger effect. Tests cancel it. A Ref already present is left alone.
func (s *Server) SeedInvoice(ref, orderID string, amountMinor int64, currency string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byRef(ref) != nil {
		return
	}
	n := len(s.docs) + 1
	s.docs = append(s.docs, &document{
		Ref: ref, Number: fmt.Sprintf("0000-%06d", n), Date: s.Now().UTC(), OrderID: orderID, CustomerID: "seeded",
		AmountMinor: amountMinor, Currency: currency, Posted: true, Version: 1,
	})
}
