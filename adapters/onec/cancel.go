package onec

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/operation"
)

// OpInvoiceCancel is the compensation of invoice.create: a cancelling
// document of its own in the base, found by our key like the invoice.
const OpInvoiceCancel = operation.TypeInvoiceCancel

// CodeAlreadyCancelled: the invoice was cancelled earlier under another key
// (by hand, or by another intent). Nothing was made for this one; a person
// decides whether that cancellation stands for it.
const CodeAlreadyCancelled = "already_cancelled"

// ErrCancelNeedsService: invoice.cancel is served by the integration HTTP
// service only. The standard OData interface has no uniqueness for our key
// and no cancelling document of ours; a deployment that routes
// invoice.cancel to an adapter in odata mode is refused at start.
var ErrCancelNeedsService = errors.New("onec: invoice.cancel needs mode http_service (the standard OData interface has no cancelling document keyed by ours)")

// Supports reports whether the adapter, as configured, performs opType:
// nil, or why not. The daemon checks every routed type at start.
func (a *Adapter) Supports(opType string) error {
	switch opType {
	case OpInvoiceCreate:
		return nil
	case OpInvoiceCancel:
		if a.cfg.Mode == ModeOData {
			return ErrCancelNeedsService
		}
		return nil
	}
	return fmt.Errorf("onec: performs %s and %s, not %s", OpInvoiceCreate, OpInvoiceCancel, opType)
}

// cancelBody is the HTTP service's cancellation request.
type cancelBody struct {
	Reason string `json:"reason,omitempty"`
}

// cancelAnswer is the HTTP service's answer to a cancellation and its
// lookup.
type cancelAnswer struct {
	Key        string `json:"key"`
	Ref        string `json:"ref"`
	InvoiceRef string `json:"invoice_ref"`
	Number     string `json:"number"`
	Replayed   bool   `json:"replayed"`
	State      string `json:"state"`
	// FoundBy is "marker" when the service found the document by the
	// reason's marker, not by its key register.
	FoundBy string `json:"found_by"`
}

func parseCancelAnswer(body []byte, class adapters.Class) (cancelAnswer, error) {
	var a cancelAnswer
	if err := adapters.DecodeJSON(body, &a, class, "1C cancellation answer"); err != nil {
		return a, err
	}
	if !plainID(a.Ref) || !plainID(a.InvoiceRef) {
		return a, adapters.Unexpected(class, "1C cancellation answer without usable refs")
	}
	return a, nil
}

func cancelOutcome(ans cancelAnswer) adapters.Outcome {
	return adapters.Outcome{
		ObjectID:       ans.Ref,
		BusinessStatus: "cancelled",
		Details: map[string]any{"number": safeText(ans.Number, 32), "invoice_id": safeText(ans.InvoiceRef, 64),
			operation.DetailTargetReplayed: ans.Replayed},
	}
}

func (a *Adapter) cancellationURL(key string) string {
	return a.cfg.BaseURL + a.cfg.ServicePath + "/cancellations/" + url.PathEscape(key)
}

// executeCancel makes the cancelling document once: the service's key
// register recognises a repeat of our key. The key also ends the reason as
// the marker "[op:<key>]", which a connector that drops the header passes.
func (a *Adapter) executeCancel(ctx context.Context, op operation.Operation) (adapters.Outcome, error) {
	if err := a.Supports(OpInvoiceCancel); err != nil {
		return adapters.Outcome{}, adapters.Invalid(err)
	}
	ref := op.String("invoice_id")
	if ref == "" || !plainID(ref) {
		return adapters.Outcome{}, adapters.Invalid(errors.New("onec: invoice_id must be the invoice's Ref"))
	}
	key := a.targetKey(op)
	resp, err := a.client.JSON(ctx, http.MethodPost, a.serviceURL(ref, "cancel"), cancelBody{Reason: withMarker(op.String("reason"), key)},
		http.Header{"Idempotency-Key": {key}})
	if err != nil {
		return adapters.Outcome{}, err
	}
	switch resp.StatusCode {
	case http.StatusCreated, http.StatusOK:
		ans, err := parseCancelAnswer(resp.Body, adapters.ReconcileBeforeRetry)
		if err != nil {
			return adapters.Outcome{}, err
		}
		if ans.InvoiceRef != ref {
			return adapters.Outcome{}, adapters.Unexpected(adapters.ReconcileBeforeRetry, "onec: cancellation answered for another invoice")
		}
		out := cancelOutcome(ans)
		if ans.Key != key {
			out.Details["key_stored"] = false
			a.cfg.Logger.Error("1C stored the cancellation without our key: replays are not deduplicated",
				"operation_key", op.Key.String(), "target_system", "1c", "target_object_id", ans.Ref)
		}
		return out, nil
	case http.StatusConflict:
		if parseServiceError(resp.Body).Error == CodeAlreadyCancelled {
			return adapters.Outcome{}, adapters.NewError(CodeAlreadyCancelled, adapters.NeverRetry,
				errors.New("onec: the invoice is already cancelled under another key"))
		}
	}
	return adapters.Outcome{}, a.serviceError(resp)
}

// lookupCancel finds the cancelling document made for op's key.
func (a *Adapter) lookupCancel(ctx context.Context, op operation.Operation) (adapters.LookupResult, error) {
	if err := a.Supports(OpInvoiceCancel); err != nil {
		return adapters.LookupResult{}, adapters.Invalid(err)
	}
	key := a.targetKey(op)
	resp, err := a.client.JSON(ctx, http.MethodGet, a.cancellationURL(key), nil, nil)
	if err != nil {
		return adapters.LookupResult{}, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
		ans, err := parseCancelAnswer(resp.Body, adapters.ReconcileBeforeRetry)
		if err != nil {
			return adapters.LookupResult{}, err
		}
		if ans.Key != key && !(ans.Key == "" && ans.FoundBy == "marker") {
			return adapters.LookupResult{}, adapters.Unexpected(adapters.ReconcileBeforeRetry, "onec: lookup answered for another key")
		}
		if ref := op.String("invoice_id"); ref != "" && ans.InvoiceRef != ref {
			return adapters.LookupResult{}, adapters.NewError(adapters.CodeKeyPayloadMismatch, adapters.NeverRetry,
				errors.New("onec: the cancellation under this key cancels another invoice"))
		}
		return adapters.LookupResult{Status: adapters.Found, Outcome: cancelOutcome(ans)}, nil
	case http.StatusNotFound:
		if parseServiceError(resp.Body).Error == "not_found" {
			return adapters.LookupResult{Status: adapters.NotFound}, nil
		}
		return adapters.LookupResult{}, adapters.Unexpected(adapters.ReconcileBeforeRetry, "onec: lookup HTTP 404 without the service's not_found")
	}
	e := a.serviceError(resp)
	if e.Class == adapters.NeverRetry && e.Code != adapters.CodeAuthorizationDenied {
		e.Class = adapters.ReconcileBeforeRetry
	}
	return adapters.LookupResult{}, e
}
