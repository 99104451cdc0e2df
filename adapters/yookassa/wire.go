package yookassa

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/idemgate/idemgate/adapters"
)

// Metadata keys the adapter writes on every payment and refund. The full
// operation key is kept here even when the Idempotence-Key header carries its
// digest, so a listing scan can match it exactly.
const (
	MetaKey        = adapters.MetaKey
	MetaApprovalID = adapters.MetaApprovalID
	MetaOrderID    = adapters.MetaOrderID
)

// Payment and refund statuses, as YooKassa's API v3 documents them.
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

// parseList parses a list envelope and each of its items, in one pass: the
// envelope is read token by token and each item decoded straight into a
// fresh object. (Unmarshalling the envelope with its items as raw messages
// and then each item scanned every item four times; a lookup reads every
// payment made while the key's calls ran, so that was half the daemon's CPU
// when answers were lost.) A field named twice in the envelope makes the
// list malformed: which "items" would count is not something to guess.
// Field names match case-insensitively, as encoding/json's do. The cursor
// field's name is unconfirmed (next_cursor in the docs,
// next_page in an SDK fixture), so both are read.
func parseList(body []byte) ([]object, string, error) {
	notList := fmt.Errorf("%w: not a list", errMalformed)
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, "", notList
	}
	var typ, nextCursor, nextPage string
	var items []object
	seen := make(map[string]bool, 4)
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, "", notList
		}
		name := listField(t.(string)) // a key is always a string
		if seen[name] {
			return nil, "", fmt.Errorf("%w: field %q twice in a list", errMalformed, name)
		}
		seen[name] = true
		switch name {
		case "type":
			err = dec.Decode(&typ)
		case "next_cursor":
			err = dec.Decode(&nextCursor)
		case "next_page":
			err = dec.Decode(&nextPage)
		case "items":
			items, err = decodeItems(dec)
			if err != nil && !errors.Is(err, errMalformed) {
				err = notList
			}
			if err != nil {
				return nil, "", err
			}
		default:
			var skip json.RawMessage
			err = dec.Decode(&skip)
		}
		if err != nil {
			return nil, "", notList
		}
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return nil, "", notList
	}
	if _, err := dec.Token(); err != io.EOF { // nothing may follow
		return nil, "", notList
	}
	if typ != "list" {
		return nil, "", notList
	}
	if items == nil {
		items = []object{}
	}
	return items, cmp.Or(nextCursor, nextPage), nil
}

// listField names an envelope field: the field parseList reads that it
// matches as encoding/json would (Unicode case folding), else itself in
// lower case.
func listField(key string) string {
	for _, f := range [...]string{"type", "items", "next_cursor", "next_page"} {
		if strings.EqualFold(key, f) {
			return f
		}
	}
	return strings.ToLower(key)
}

// decodeItems reads the items array (or null) at dec, each item checked.
func decodeItems(dec *json.Decoder) ([]object, error) {
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if t == nil { // "items": null
		return nil, nil
	}
	if t != json.Delim('[') {
		return nil, errors.New("items: not an array")
	}
	var out []object
	for dec.More() {
		var o object
		if err := dec.Decode(&o); err != nil {
			return nil, fmt.Errorf("%w: not a JSON object", errMalformed)
		}
		if err := o.check(); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	if _, err := dec.Token(); err != nil { // the closing ']'
		return nil, err
	}
	return out, nil
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
