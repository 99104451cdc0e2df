package yookassa

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Metadata keys the adapter writes on every payment and refund. The full
// operation key is kept here even when the Idempotence-Key header carries its
// digest, so a listing scan can match it exactly.
const (
	MetaKey        = "idemgate_key"
	MetaApprovalID = "idemgate_approval_id"
	MetaOrderID    = "idemgate_order_id"
)

// Payment and refund statuses (TARGETS.md §5).
const (
	StatusPending           = "pending"
	StatusWaitingForCapture = "waiting_for_capture"
	StatusSucceeded         = "succeeded"
	StatusCanceled          = "canceled"
)

// amountObj is YooKassa's money object: a decimal string in major units.
type amountObj struct {
	Value    string `json:"value"`
	Currency string `json:"currency"`
}

// paymentRequest is the body of POST /v3/payments as the adapter sends it.
type paymentRequest struct {
	Amount          amountObj         `json:"amount"`
	Capture         bool              `json:"capture"`
	PaymentMethodID string            `json:"payment_method_id"`
	Description     string            `json:"description,omitempty"`
	Metadata        map[string]string `json:"metadata,omitempty"`
}

// refundRequest is the body of POST /v3/refunds.
type refundRequest struct {
	PaymentID   string            `json:"payment_id"`
	Amount      amountObj         `json:"amount"`
	Description string            `json:"description,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
}

// cancellation says who canceled a payment and why.
type cancellation struct {
	Party  string `json:"party"`
	Reason string `json:"reason"`
}

// object is the part of a payment or refund object the adapter reads. Both
// share these fields; PaymentID is set on refunds only.
type object struct {
	ID                  string            `json:"id"`
	Status              string            `json:"status"`
	Paid                bool              `json:"paid,omitempty"`
	Amount              amountObj         `json:"amount"`
	PaymentID           string            `json:"payment_id,omitempty"`
	CreatedAt           string            `json:"created_at,omitempty"`
	Metadata            map[string]string `json:"metadata,omitempty"`
	CancellationDetails *cancellation     `json:"cancellation_details,omitempty"`
	Test                bool              `json:"test,omitempty"`
}

// errorBody is YooKassa's error document:
// {"type":"error","id":…,"code":…,"description":…,"parameter":…}. retry_after
// (milliseconds) appears on 202/429/500 answers in the official SDK.
type errorBody struct {
	Type        string          `json:"type"`
	ID          string          `json:"id"`
	Code        string          `json:"code"`
	Description string          `json:"description,omitempty"`
	Parameter   string          `json:"parameter,omitempty"`
	RetryAfter  json.RawMessage `json:"retry_after,omitempty"`
}

// listEnvelope is the envelope of GET /v3/payments and GET /v3/refunds. The cursor
// field's name is unconfirmed (TARGETS.md §9.5: next_cursor in the docs,
// next_page in an SDK fixture), so both are read.
type listEnvelope struct {
	Type       string            `json:"type"`
	Items      []json.RawMessage `json:"items"`
	NextCursor string            `json:"next_cursor,omitempty"`
	NextPage   string            `json:"next_page,omitempty"`
}

// Cursor returns the next-page cursor, whichever field carried it.
func (l listEnvelope) Cursor() string {
	if l.NextCursor != "" {
		return l.NextCursor
	}
	return l.NextPage
}

// errMalformed is returned by the parsers for any body that is not a
// well-formed object of the expected kind.
var errMalformed = errors.New("malformed response body")

var knownStatus = map[string]bool{
	StatusPending: true, StatusWaitingForCapture: true, StatusSucceeded: true, StatusCanceled: true,
}

// parseObject parses a payment or refund object and checks the fields the
// adapter relies on. It never returns a partly valid object.
func parseObject(body []byte) (object, error) {
	var o object
	if err := json.Unmarshal(body, &o); err != nil {
		return object{}, fmt.Errorf("%w: not a JSON object", errMalformed)
	}
	if err := o.check(); err != nil {
		return object{}, err
	}
	return o, nil
}

func (o object) check() error {
	if o.ID == "" || len(o.ID) > 64 || !printableASCII(o.ID) {
		return fmt.Errorf("%w: bad or missing id", errMalformed)
	}
	if !knownStatus[o.Status] {
		return fmt.Errorf("%w: unknown status", errMalformed)
	}
	if _, err := parseMinor(o.Amount.Value); err != nil {
		return fmt.Errorf("%w: bad amount", errMalformed)
	}
	if !validCurrency(o.Amount.Currency) {
		return fmt.Errorf("%w: bad currency", errMalformed)
	}
	return nil
}

// parseList parses a list envelope and each of its items.
func parseList(body []byte) ([]object, string, error) {
	var l listEnvelope
	if err := json.Unmarshal(body, &l); err != nil {
		return nil, "", fmt.Errorf("%w: not a list", errMalformed)
	}
	if l.Type != "list" {
		return nil, "", fmt.Errorf("%w: not a list", errMalformed)
	}
	out := make([]object, 0, len(l.Items))
	for _, raw := range l.Items {
		o, err := parseObject(raw)
		if err != nil {
			return nil, "", err
		}
		out = append(out, o)
	}
	return out, l.Cursor(), nil
}

// parseError parses an error document; ok is false when the body is not one.
func parseError(body []byte) (errorBody, bool) {
	var e errorBody
	if err := json.Unmarshal(body, &e); err != nil {
		return errorBody{}, false
	}
	if e.Type != "error" || e.Code == "" {
		return errorBody{}, false
	}
	return e, true
}

// RetryAfterMillis reads retry_after (a number of milliseconds, sometimes
// quoted); 0 when absent or not a sane number.
func (e errorBody) RetryAfterMillis() int64 {
	s := strings.Trim(string(e.RetryAfter), `"`)
	if s == "" {
		return 0
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > 24*3600*1000 {
		return 0
	}
	return n
}

// parseMinor parses a decimal amount string ("1250.00", "5", "0.5") into minor
// units. Negative, malformed or absurdly large values are an error.
func parseMinor(s string) (int64, error) {
	if s == "" || len(s) > 20 {
		return 0, errors.New("bad amount")
	}
	whole, frac, hasDot := strings.Cut(s, ".")
	if whole == "" || !digits(whole) || (hasDot && (frac == "" || len(frac) > 2 || !digits(frac))) {
		return 0, errors.New("bad amount")
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w > (1<<62)/100 {
		return 0, errors.New("bad amount")
	}
	for len(frac) < 2 {
		frac += "0"
	}
	f, _ := strconv.ParseInt(frac, 10, 64)
	return w*100 + f, nil
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func validCurrency(c string) bool {
	if len(c) != 3 {
		return false
	}
	for i := 0; i < 3; i++ {
		if c[i] < 'A' || c[i] > 'Z' {
			return false
		}
	}
	return true
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
