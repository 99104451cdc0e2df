package adapters

import (
	"strconv"
	"unicode/utf8"
)

// The rules for values adapters write to targets or keep from their
// answers, the same for every target.

// Metadata keys under which payment adapters store the operation key, the
// order and the approval on the target's object (Stripe metadata, YooKassa
// metadata, T-Bank DATA), so that a lookup can match the full key exactly
// even when the target's key header carries only its digest.
const (
	MetaKey        = "idemgate_key"
	MetaOrderID    = "idemgate_order_id"
	MetaApprovalID = "idemgate_approval_id"
)

// Marker is the "[op:<key>]" text adapters append to a free-text field
// (a comment, a name, a description) of an object they create, so that a
// lookup finds the object even behind a connector that dropped every field
// meant for the key.
func Marker(key string) string { return "[op:" + key + "]" }

// FormatMinor writes an amount in minor units as the decimal most targets
// take: units, a point and two digits ("1250.00", "-0.07").
func FormatMinor(m int64) string {
	sign := ""
	if m < 0 {
		sign, m = "-", -m
	}
	return sign + strconv.FormatInt(m/100, 10) + "." + strconv.FormatInt(100+m%100, 10)[1:]
}

// Truncate cuts s to at most n characters (runes), for a field the target
// bounds by length.
func Truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

// SafeToken keeps a short identifier-like value from a target's answer
// (an object id, an error code) for results and logs: printable ASCII
// without spaces, quotes or backslashes, at most n bytes. Anything else
// becomes "": a target's text never reaches a result unchecked.
func SafeToken(s string, n int) string {
	if len(s) > n {
		return ""
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '\'' {
			return ""
		}
	}
	return s
}

// Invalid is the error of an operation that cannot be sent as it stands (a
// field missing or out of the target's bounds): validation_error, which no
// retry can cure.
func Invalid(err error) *Error { return NewError(CodeValidation, NeverRetry, err) }

// NoEffect reclassifies the error of a request that cannot have had an
// effect (a read; T-Bank's Init, which moves no money): "may have had an
// effect, reconcile" becomes "retry". Other classes stay.
func NoEffect(err error) error {
	e := AsError(err)
	if e == nil {
		return nil
	}
	if e.Class == ReconcileBeforeRetry {
		e.Class = Retry
	}
	return e
}
