package onec

import (
	"encoding/json"

	"strconv"
	"strings"
	"time"

	"github.com/idemgate/idemgate/adapters"
)

// invoiceBody is the HTTP service's request.
type invoiceBody struct {
	OrderID     string `json:"order_id"`
	CustomerID  string `json:"customer_id"`
	AmountMinor int64  `json:"amount_minor"`
	Currency    string `json:"currency"`
	DueDate     string `json:"due_date,omitempty"`
	Description string `json:"description,omitempty"`
}

// invoiceAnswer is the HTTP service's answer to POST and GET.
type invoiceAnswer struct {
	Key      string `json:"key"`
	Ref      string `json:"ref"`
	Number   string `json:"number"`
	Posted   bool   `json:"posted"`
	Replayed bool   `json:"replayed"`
	State    string `json:"state"`
	// FoundBy is "marker" when the service found the invoice by the
	// comment marker, not by its key register.
	FoundBy string `json:"found_by"`
}

// parseInvoiceAnswer decodes and checks an invoice answer; class is the class
// of a malformed one.
func parseInvoiceAnswer(body []byte, class adapters.Class) (invoiceAnswer, error) {
	var a invoiceAnswer
	if err := adapters.DecodeJSON(body, &a, class, "1C invoice answer"); err != nil {
		return a, err
	}
	if !plainID(a.Ref) {
		return a, adapters.Unexpected(class, "1C invoice answer without a usable ref")
	}
	return a, nil
}

// serviceError is the HTTP service's error body.
type serviceError struct {
	Error      string          `json:"error"`
	RetryAfter json.RawMessage `json:"retry_after"`
}

// parseServiceError reads the error body leniently: an unreadable one yields
// the zero value.
func parseServiceError(body []byte) serviceError {
	var e serviceError
	if json.Unmarshal(body, &e) != nil {
		return serviceError{}
	}
	return e
}

// retryAfterOf returns the Retry-After header or the body's retry_after
// (seconds).
func retryAfterOf(resp *adapters.HTTPResponse, e serviceError, now time.Time) time.Duration {
	if d, ok := adapters.ParseRetryAfter(resp.Header.Get("Retry-After"), now); ok {
		return d
	}
	if len(e.RetryAfter) > 0 {
		if d, ok := adapters.ParseRetryAfter(strings.Trim(string(e.RetryAfter), `"`), now); ok {
			return d
		}
	}
	return 0
}

// odataEntity is the part of a document entity the adapter reads.
type odataEntity struct {
	Ref      string      `json:"Ref_Key"`
	Number   string      `json:"Number"`
	Posted   bool        `json:"Posted"`
	Deleted  bool        `json:"DeletionMark"`
	OrderID  string      `json:"НомерЗаказа"`
	Amount   json.Number `json:"СуммаДокумента"`
	Currency string      `json:"ВалютаДокумента"`
	Date     string      `json:"Date"`
	Comment  string      `json:"Комментарий"`
	// Key is filled from the configured key attribute.
	Key string `json:"-"`
}

func decodeEntity(raw json.RawMessage, keyAttr string, class adapters.Class) (odataEntity, error) {
	var e odataEntity
	if err := adapters.DecodeJSON(raw, &e, class, "1C OData entity"); err != nil {
		return e, err
	}
	var attrs map[string]json.RawMessage
	if err := adapters.DecodeJSON(raw, &attrs, class, "1C OData entity"); err != nil {
		return e, err
	}
	if v, ok := attrs[keyAttr]; ok {
		if err := adapters.DecodeJSON(v, &e.Key, class, "1C OData key attribute"); err != nil {
			return e, err
		}
	}
	if !plainID(e.Ref) {
		return e, adapters.Unexpected(class, "1C OData entity without a usable Ref_Key")
	}
	return e, nil
}

// parseODataEntity decodes the answer to an OData POST.
func parseODataEntity(body []byte, keyAttr string, class adapters.Class) (odataEntity, error) {
	return decodeEntity(body, keyAttr, class)
}

// parseODataList decodes {"value":[…]}.
func parseODataList(body []byte, keyAttr string, class adapters.Class) ([]odataEntity, error) {
	var l struct {
		Value *[]json.RawMessage `json:"value"`
	}
	if err := adapters.DecodeJSON(body, &l, class, "1C OData list"); err != nil {
		return nil, err
	}
	if l.Value == nil {
		return nil, adapters.Unexpected(class, "1C OData list without value")
	}
	out := make([]odataEntity, 0, len(*l.Value))
	for _, raw := range *l.Value {
		e, err := decodeEntity(raw, keyAttr, class)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// odataErrorCode returns the odata.error code ("" when none).
func odataErrorCode(body []byte) string {
	var e struct {
		Err struct {
			Code json.RawMessage `json:"code"`
		} `json:"odata.error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	return strings.Trim(string(e.Err.Code), `"`)
}

// plainID accepts ids that are safe to return: short, printable ASCII.
func plainID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// minorOf parses an OData decimal into minor units.
func minorOf(n json.Number) (int64, bool) {
	s := string(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	whole, frac, _ := strings.Cut(s, ".")
	frac = strings.TrimRight(frac, "0")
	if whole == "" || len(frac) > 2 {
		return 0, false
	}
	for len(frac) < 2 {
		frac += "0"
	}
	v, err := strconv.ParseInt(whole+frac, 10, 64)
	if err != nil {
		return 0, false
	}
	if neg {
		v = -v
	}
	return v, true
}
