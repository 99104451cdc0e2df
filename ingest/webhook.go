// One webhook, from request to outcome: source and address checks, body,
// signature, event id, optional re-fetch, mapping to a command and its
// publication.

package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/wire"
)

// outcome is what became of one webhook.
type outcome struct {
	status    int
	reason    Reason // set when status is not 200
	result    string // accepted, duplicate, unrouted (status 200)
	msg       string // safe text for the sender
	err       error  // safe detail for the log
	eventID   string
	eventType string
	operation string
}

func reject(status int, reason Reason, msg string, err error) outcome {
	return outcome{status: status, reason: reason, msg: msg, err: err}
}

func (s *Server) serveWebhook(w http.ResponseWriter, r *http.Request) {
	src, ok := s.sources[r.PathValue("source")]
	if !ok {
		s.counters[unknownSourceLabel].reject(ReasonUnknownSource)
		writeText(w, http.StatusNotFound, "unknown webhook source")
		return
	}
	start := s.now()
	out := s.handle(w, r, src)
	switch {
	case out.status == http.StatusOK:
		switch out.result {
		case "accepted":
			src.counters.accepted.Add(1)
		case "duplicate":
			src.counters.duplicate.Add(1)
		case "unrouted":
			src.counters.unrouted.Add(1)
			if _, seen := src.unroutedTypes.LoadOrStore(out.eventType, true); !seen {
				// Providers send event types nobody routed (answered 200 and
				// dropped, by design); a route misspelt drops a wanted one
				// the same way, so each type is said once.
				s.log.Info("webhook event type has no route: acknowledged (200) and dropped; add it to the source's routes if it should become a command",
					"source", src.name, "event_type", out.eventType)
			}
		}
		if s.log.Enabled(r.Context(), slog.LevelDebug) {
			s.log.Debug("webhook "+out.result, "source", src.name, "event_id", out.eventID,
				"event_type", out.eventType, "operation", out.operation, "duration", s.now().Sub(start))
		}
		writeText(w, http.StatusOK, "OK")
	default:
		src.counters.reject(out.reason)
		level := slog.LevelWarn
		if out.status >= 500 {
			level = slog.LevelError
			w.Header().Set("Retry-After", "5")
		}
		attrs := []any{"source", src.name, "status", out.status, "reason", string(out.reason)}
		if out.eventID != "" {
			attrs = append(attrs, "event_id", out.eventID)
		}
		if out.operation != "" {
			attrs = append(attrs, "operation", out.operation)
		}
		if out.err != nil {
			attrs = append(attrs, "error", out.err.Error())
		}
		s.log.Log(r.Context(), level, "webhook rejected", attrs...)
		writeText(w, out.status, out.msg)
	}
}

func writeText(w http.ResponseWriter, status int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, text)
}

// handle runs one webhook through the steps of the package doc.
func (s *Server) handle(w http.ResponseWriter, r *http.Request, src *source) outcome {
	if len(src.allowed) > 0 {
		addr, ok := ClientAddr(r, s.trusted)
		if !ok || !inPrefixes(addr, src.allowed) {
			return reject(http.StatusForbidden, ReasonAddress, "sender address not allowed", nil)
		}
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return reject(http.StatusUnsupportedMediaType, ReasonContentType, "content type must be application/json", nil)
	}
	if r.ContentLength > s.cfg.MaxBodyBytes {
		return reject(http.StatusRequestEntityTooLarge, ReasonTooLarge, "body too large", nil)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return reject(http.StatusRequestEntityTooLarge, ReasonTooLarge, "body too large", nil)
		}
		return reject(http.StatusBadRequest, ReasonMalformed, "body could not be read", err)
	}

	// Verify the raw bytes before parsing them.
	now := s.now()
	var hdrID string
	switch src.cfg.Scheme {
	case SchemeStripe:
		err = VerifyStripe(r.Header.Get("Stripe-Signature"), body, src.secrets, now, src.cfg.Tolerance)
	case SchemeStandard:
		hdrID = r.Header.Get("webhook-id")
		err = VerifyStandard(hdrID, r.Header.Get("webhook-timestamp"), r.Header.Get("webhook-signature"),
			body, src.keys, now, src.cfg.Tolerance)
	}
	if err != nil {
		return signatureReject(err)
	}
	doc, err := parseBody(body)
	if err != nil {
		return reject(http.StatusBadRequest, ReasonMalformed, err.Error(), nil)
	}
	if src.cfg.Scheme == SchemeTBank {
		if err := VerifyTBank(doc, src.cfg.TerminalKey, src.secrets); err != nil {
			return signatureReject(err)
		}
	}

	eventType, ok := lookupString(doc, src.cfg.EventTypePath)
	if !ok || eventType == "" {
		return reject(http.StatusBadRequest, ReasonMalformed, "no event type at "+src.cfg.EventTypePath, nil)
	}
	parts, err := eventIDParts(src.cfg.Scheme, doc, eventType, hdrID)
	if err != nil {
		return reject(http.StatusBadRequest, ReasonMalformed, err.Error(), nil)
	}
	eventID := EventID(src.name, parts...)
	route, routed := src.routes[eventType]
	if !routed {
		return outcome{status: http.StatusOK, result: "unrouted", eventID: eventID, eventType: eventType}
	}
	withEvent := func(o outcome) outcome {
		o.eventID, o.eventType, o.operation = eventID, eventType, route.Operation
		return o
	}

	if src.refetcher != nil {
		if o, ok := s.refetch(r.Context(), src, doc, eventType); !ok {
			return withEvent(o)
		}
	}

	body, err = s.command(src, route, doc, eventID)
	if err != nil {
		return withEvent(reject(http.StatusUnprocessableEntity, ReasonMapping,
			"the notification does not fit the configured route", err))
	}
	msg := nats.NewMsg(wire.CommandSubject(route.Operation))
	msg.Data = body
	msg.Header.Set(wire.HeaderSource, src.name)
	tctx, endSpan := traceCommand(r, msg, src.name, route.Operation)
	ctx, cancel := context.WithTimeout(tctx, s.cfg.PublishTimeout)
	defer cancel()
	ack, err := s.js.PublishMsg(ctx, msg, jetstream.WithMsgID(eventID), jetstream.WithExpectStream(s.cfg.CommandsStream))
	endSpan(err != nil)
	if err != nil {
		return withEvent(reject(http.StatusServiceUnavailable, ReasonPublishUnavailable,
			"queue unavailable, retry later", fmt.Errorf("publish: %w", err)))
	}
	if ack.Duplicate {
		return withEvent(outcome{status: http.StatusOK, result: "duplicate"})
	}
	return withEvent(outcome{status: http.StatusOK, result: "accepted"})
}

func signatureReject(err error) outcome {
	if errors.Is(err, ErrTimestampOutOfTolerance) {
		return reject(http.StatusUnauthorized, ReasonTimestamp, "signature timestamp outside the tolerance", err)
	}
	return reject(http.StatusUnauthorized, ReasonSignature, "signature does not verify", err)
}

// eventIDParts returns the parts of the stable event id (see EventID).
func eventIDParts(scheme string, doc map[string]any, eventType, hdrID string) ([]string, error) {
	var paths []string
	switch scheme {
	case SchemeStandard:
		return []string{hdrID}, nil
	case SchemeStripe:
		paths = []string{"id"}
	case SchemeYooKassa:
		id, ok := lookupString(doc, "object.id")
		if !ok || id == "" {
			return nil, errors.New("no object.id in the notification")
		}
		return []string{eventType, id}, nil
	case SchemeTBank:
		paths = []string{"PaymentId", "Status", "Amount"}
	}
	parts := make([]string, len(paths))
	for i, p := range paths {
		v, ok := lookupString(doc, p)
		if !ok || v == "" {
			return nil, fmt.Errorf("no %s in the notification", p)
		}
		parts[i] = v
	}
	return parts, nil
}

// refetch replaces doc["object"] with the provider's copy, after checking
// that the copy agrees with the notification. ok false means stop with o.
func (s *Server) refetch(ctx context.Context, src *source, doc map[string]any, eventType string) (o outcome, ok bool) {
	notified, isObj := doc["object"].(map[string]any)
	id, _ := lookupString(notified, "id")
	if !isObj || id == "" {
		return reject(http.StatusBadRequest, ReasonMalformed, "no object.id in the notification", nil), false
	}
	raw, err := src.refetcher.Refetch(ctx, ObjectRef{Source: src.name, EventType: eventType, ID: id})
	if errors.Is(err, ErrObjectNotFound) {
		return reject(http.StatusUnauthorized, ReasonNotTrusted, "object unknown to the provider", err), false
	}
	if err != nil {
		return reject(http.StatusServiceUnavailable, ReasonRefetchUnavailable, "provider unavailable, retry later", err), false
	}
	fetched, err := parseBody(raw)
	if err != nil {
		return reject(http.StatusServiceUnavailable, ReasonRefetchUnavailable, "provider unavailable, retry later",
			fmt.Errorf("re-fetched object: %w", err)), false
	}
	for _, p := range []string{"id", "status", "amount.value", "amount.currency"} {
		nv, nok := lookupString(notified, p)
		fv, fok := lookupString(fetched, p)
		if p == "id" || p == "status" {
			nok, fok = true, true // must agree, present or not
		}
		if nok && fok && nv != fv {
			return reject(http.StatusConflict, ReasonNotTrusted,
				"notification differs from the provider's object", fmt.Errorf("re-fetched %s differs", p)), false
		}
	}
	doc["object"] = fetched
	return outcome{}, true
}

// command builds and checks the command envelope of a routed webhook.
func (s *Server) command(src *source, route Route, doc map[string]any, eventID string) ([]byte, error) {
	payload, err := mapPayload(route, doc)
	if err != nil {
		return nil, err
	}
	cmd := operation.Command{EventID: eventID, Operation: route.Operation, KeyVersion: route.KeyVersion}
	if len(route.IntentPaths) > 0 {
		parts := make([]string, len(route.IntentPaths))
		for i, p := range route.IntentPaths {
			v, ok := lookupString(doc, p)
			if !ok || v == "" {
				return nil, &MappingError{Field: "intent_id", Reason: "path " + p + " not found in the body"}
			}
			parts[i] = v
		}
		cmd.IntentID = EventID(src.name, parts...)
	}
	cmd.Payload, err = json.Marshal(payload)
	if err != nil {
		return nil, &MappingError{Field: "payload", Reason: "cannot be encoded"}
	}
	body, err := json.Marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("encode command: %w", err)
	}
	// The daemon would reject what its decoder refuses: refuse it here, where
	// the sender can still retry once the route is fixed.
	if _, err := s.decoder.Decode(body); err != nil {
		return nil, err
	}
	return body, nil
}
