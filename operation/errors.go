package operation

import "errors"

// DecodeCode is the safe, stable code of a rejected command; it becomes the
// error_code of the "rejected" result.
type DecodeCode string

// Decode codes.
const (
	CodeNotJSON          DecodeCode = "not_json"
	CodeTooLarge         DecodeCode = "too_large"
	CodeUnknownOperation DecodeCode = "unknown_operation"
	CodeMissingField     DecodeCode = "missing_field"
	CodeInvalidField     DecodeCode = "invalid_field"
	CodeBadKey           DecodeCode = "bad_key"
	CodeKeyMismatch      DecodeCode = "key_mismatch"
)

// Sentinels, one per DecodeCode, for errors.Is.
var (
	ErrNotJSON          = errors.New("command is not valid JSON")
	ErrTooLarge         = errors.New("command is too large")
	ErrUnknownOperation = errors.New("unknown operation")
	ErrMissingField     = errors.New("missing field")
	ErrInvalidField     = errors.New("invalid field")
	ErrBadKey           = errors.New("bad operation key")
	ErrKeyMismatch      = errors.New("operation key does not match the command")
)

// ErrInvalidConfig reports a Decoder (or DeriveKey) configured with an invalid
// environment. It is not a DecodeError: the input is not at fault, so callers
// must not reject the command for it.
var ErrInvalidConfig = errors.New("invalid decoder configuration")

func (c DecodeCode) sentinel() error {
	switch c {
	case CodeNotJSON:
		return ErrNotJSON
	case CodeTooLarge:
		return ErrTooLarge
	case CodeUnknownOperation:
		return ErrUnknownOperation
	case CodeMissingField:
		return ErrMissingField
	case CodeInvalidField:
		return ErrInvalidField
	case CodeBadKey:
		return ErrBadKey
	case CodeKeyMismatch:
		return ErrKeyMismatch
	}
	return nil
}

// DecodeError is why a command was rejected. Everything in it is safe to log
// and publish: Msg names fields but never quotes payload values, and Key and
// EventID are only set when they passed the key rules.
type DecodeError struct {
	// Code is the stable error code.
	Code DecodeCode
	// Field is the offending field, e.g. "event_id" or "payload.amount_minor";
	// empty when the problem is not one field's, or when the field's own name
	// looked unsafe to repeat.
	Field string
	// Msg says what is wrong, without quoting values.
	Msg string
	// Key is the operation key when one could still be derived, so that a
	// rejected result can be published under it.
	Key string
	// EventID is the command's event_id when it could be read and is safe.
	EventID string
	// Operation is the operation type when it is registered.
	Operation string
	// Err is the underlying cause, if any (e.g. a *SyntaxError or *KeyError).
	Err error
}

func (e *DecodeError) Error() string {
	s := "rejected command: " + string(e.Code)
	if e.Field != "" {
		s += ": " + e.Field
	}
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	return s
}

// Is matches the sentinel of e.Code (ErrNotJSON, ErrBadKey, …).
func (e *DecodeError) Is(target error) bool {
	s := e.Code.sentinel()
	return s != nil && target == s
}

// Unwrap returns the underlying cause.
func (e *DecodeError) Unwrap() error { return e.Err }

// RejectedResult is the "rejected" result to publish for this error. Its
// OperationKey is empty when no key could be derived; the reason is
// e.Error(), which never quotes values.
func (e *DecodeError) RejectedResult() Result {
	return Result{
		OperationKey: e.Key,
		EventID:      e.EventID,
		Operation:    e.Operation,
		Status:       ResultRejected,
		ErrorCode:    string(e.Code),
		Reason:       e.Error(),
	}
}
