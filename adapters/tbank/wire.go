package tbank

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Payment statuses T-Bank's acquiring API v2 documents (the full official
// list is unconfirmed).
const (
	StatusNew        = "NEW"
	StatusAuthorized = "AUTHORIZED"
	StatusConfirmed  = "CONFIRMED"
	StatusRejected   = "REJECTED"
)

// finalFailure are statuses in which the payment will never move money.
var finalFailure = map[string]bool{
	StatusRejected: true, "DEADLINE_EXPIRED": true, "CANCELED": true, "AUTH_FAIL": true,
	"REVERSED": true,
}

// succeeded are statuses in which the money moved (or is held, two-stage).
var succeeded = map[string]bool{
	StatusConfirmed: true, StatusAuthorized: true, "PARTIAL_REFUNDED": true, "REFUNDED": true,
	"REFUNDING": true, "PARTIAL_REVERSED": true,
}

// flexID is an id T-Bank sends as a string in some answers and a number in
// others (PaymentId).
type flexID string

func (f *flexID) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*f = flexID(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return err
	}
	if _, err := n.Int64(); err != nil {
		return errors.New("id is not an integer")
	}
	*f = flexID(n.String())
	return nil
}

// flexCode is ErrorCode: a string ("0") in the docs, tolerated as a number.
type flexCode string

func (f *flexCode) UnmarshalJSON(b []byte) error {
	var id flexID
	if err := id.UnmarshalJSON(b); err != nil {
		return err
	}
	*f = flexCode(id)
	return nil
}

// answer is the common part of every T-Bank answer.
type answer struct {
	Success   *bool    `json:"Success"`
	ErrorCode flexCode `json:"ErrorCode"`
	Status    string   `json:"Status"`
	PaymentID flexID   `json:"PaymentId"`
	OrderID   string   `json:"OrderId"`
	Amount    *int64   `json:"Amount"`
	Payments  []struct {
		PaymentID flexID   `json:"PaymentId"`
		Amount    *int64   `json:"Amount"`
		Status    string   `json:"Status"`
		Success   *bool    `json:"Success"`
		ErrorCode flexCode `json:"ErrorCode"`
	} `json:"Payments"`
	OriginalAmount *int64 `json:"OriginalAmount"`
	NewAmount      *int64 `json:"NewAmount"`
}

var errMalformed = errors.New("malformed T-Bank answer")

// parseAnswer decodes an answer and checks the envelope: Success present,
// ErrorCode "0" exactly when Success, a sane code.
func parseAnswer(body []byte) (answer, error) {
	var a answer
	if err := json.Unmarshal(body, &a); err != nil {
		return answer{}, fmt.Errorf("%w: not a JSON object of the expected shape", errMalformed)
	}
	if a.Success == nil {
		return answer{}, fmt.Errorf("%w: no Success field", errMalformed)
	}
	if !safeCode(string(a.ErrorCode)) {
		return answer{}, fmt.Errorf("%w: bad ErrorCode", errMalformed)
	}
	if *a.Success != (a.ErrorCode == "0") {
		return answer{}, fmt.Errorf("%w: Success and ErrorCode disagree", errMalformed)
	}
	return a, nil
}

// safeCode: 1 to 6 digits.
func safeCode(c string) bool {
	if c == "" || len(c) > 6 {
		return false
	}
	for i := 0; i < len(c); i++ {
		if c[i] < '0' || c[i] > '9' {
			return false
		}
	}
	return true
}

// safeID: 1 to 20 digits (PaymentId).
func safeID(s string) bool {
	return s != "" && len(s) <= 20 && strings.Trim(s, "0123456789") == ""
}

// safeStatus: an upper-case status word.
func safeStatus(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}
