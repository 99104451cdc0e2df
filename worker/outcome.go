package worker

import (
	"encoding/json"
	"slices"
	"strconv"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/redact"
)

// The normalised result of an outcome: what the journal keeps and the
// agent gets, never the target's raw response.

// outcomeJSON is the normalised result of an outcome. An outcome without
// details under the default redaction is the same document for the same
// business status: it is built once per status and shared (never modified).
func (w *Worker) outcomeJSON(o adapters.Outcome) json.RawMessage {
	if !w.defaultRedact || len(o.Details) > 0 {
		return outcomeJSON(w.d, o)
	}
	if b, ok := w.outcomes.Load(o.BusinessStatus); ok {
		return b.(json.RawMessage)
	}
	b := outcomeJSON(w.d, o)
	if w.outcomesN.Add(1) <= maxCachedOutcomes {
		w.outcomes.Store(o.BusinessStatus, b)
	}
	return b
}

// maxCachedOutcomes bounds the business statuses whose outcome is kept.
const maxCachedOutcomes = 64

// outcomeJSON is the normalised result kept and replayed: the business status
// and safe details, redacted, never the target's raw response. The default
// redaction (Deps.Redact nil) is done as the document is written
// (redact.AppendMember: strings are redacted, numbers checked for card
// numbers, names screened once each), with the bytes redact.JSON would make
// of the encoded document; a custom Deps.Redact gets the encoded document.
func outcomeJSON(d Deps, o adapters.Outcome) json.RawMessage {
	if d.Redact == nil {
		if b, err := appendOutcome(make([]byte, 0, 64+32*len(o.Details)), o); err == nil {
			return b
		}
		return redact.JSON(fallbackOutcome(o))
	}
	m := map[string]any{"business_status": o.BusinessStatus}
	for k, v := range o.Details {
		if k != "business_status" {
			m[k] = v
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		b = fallbackOutcome(o)
	}
	return d.Redact(b)
}

// fallbackOutcome is the result of an outcome whose details do not encode.
func fallbackOutcome(o adapters.Outcome) []byte {
	return []byte(`{"business_status":` + strconv.Quote(o.BusinessStatus) + `}`)
}

// appendOutcome writes the object {"business_status": …, details…} with
// its members in name order, as encoding/json writes a map.
func appendOutcome(dst []byte, o adapters.Outcome) ([]byte, error) {
	var small [8]string
	names := append(small[:0], "business_status")
	for k := range o.Details {
		if k != "business_status" {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	dst = append(dst, '{')
	var err error
	for i, k := range names {
		if i > 0 {
			dst = append(dst, ',')
		}
		var v any = o.BusinessStatus
		if k != "business_status" {
			v = o.Details[k]
		}
		if dst, err = redact.AppendMember(dst, k, v); err != nil {
			return nil, err
		}
	}
	return append(dst, '}'), nil
}
