package operation

import (
	"errors"
	"fmt"
	"strings"

	"github.com/idemgate/idemgate/redact"
)

// Key is a parsed operation key: <env>:<operation>:<intent_id>:<key_version>.
type Key struct {
	Env       string
	Operation string
	IntentID  string
	Version   string
}

// String returns the key in its wire form.
func (k Key) String() string {
	var buf [MaxKeyLen]byte
	return string(k.appendTo(buf[:0]))
}

// VersionPrefix is what the wire form of every version of k begins with:
// <env>:<operation>:<intent_id>:v, which only the version's digits follow
// (ValidateVersion). k.Version is not read. The journal finds an intent's
// keys, whatever their version, by this prefix.
func (k Key) VersionPrefix() string {
	var buf [MaxKeyLen]byte
	return string(append(k.appendUnversioned(buf[:0]), 'v'))
}

// appendTo appends the key's wire form: the one place that spells it.
func (k Key) appendTo(b []byte) []byte {
	return append(k.appendUnversioned(b), k.Version...)
}

// appendUnversioned appends the wire form up to the version:
// <env>:<operation>:<intent_id>: .
func (k Key) appendUnversioned(b []byte) []byte {
	b = append(b, k.Env...)
	b = append(b, ':')
	b = append(b, k.Operation...)
	b = append(b, ':')
	b = append(b, k.IntentID...)
	return append(b, ':')
}

// Limits of the key grammar.
const (
	// MaxKeyLen is the longest operation key, in bytes.
	MaxKeyLen = 255
	// MaxEnvLen is the longest environment name.
	MaxEnvLen = 32
	// MaxOperationNameLen is the longest operation type name.
	MaxOperationNameLen = 64
	// DefaultKeyVersion is the key version used when a command names none.
	DefaultKeyVersion = "v1"
)

// KeyError reports why an operation key, or one part of it, was refused. It
// never quotes the key: a refused key may be exactly the secret it was
// refused for. It matches ErrBadKey with errors.Is.
type KeyError struct {
	// Part is the part at fault: "env", "operation", "intent_id",
	// "key_version", or "" for the key as a whole.
	Part string
	// Reason says what is wrong, without quoting the input.
	Reason string
}

func (e *KeyError) Error() string {
	if e.Part == "" {
		return "bad operation key: " + e.Reason
	}
	return "bad operation key: " + e.Part + ": " + e.Reason
}

// Is reports whether target is ErrBadKey.
func (e *KeyError) Is(target error) bool { return target == ErrBadKey }

// ParseKey parses and validates an operation key.
//
// Grammar: at most 255 bytes of ASCII [A-Za-z0-9._~:-], split on ':' into
// env, operation, intent_id and key_version. env is the first part
// (ValidateEnv), operation the second (ValidateOperationName), key_version the
// last (ValidateVersion), and intent_id everything in between, so an intent
// may itself contain ':' (as in "prod:crm.callback:create:event-90173:v1")
// but no empty segment. The key must not look like it holds a card number or
// a secret (see ValidateKey).
//
// ParseKey checks the operation name's grammar only; whether the operation is
// registered is for the Registry (DeriveKey and Decoder check it).
func ParseKey(s string) (Key, error) {
	if err := checkKeyString(s); err != nil {
		return Key{}, err
	}
	parts := strings.Split(s, ":")
	if len(parts) < 4 {
		return Key{}, &KeyError{Reason: "want <env>:<operation>:<intent_id>:<key_version>"}
	}
	k := Key{
		Env:       parts[0],
		Operation: parts[1],
		IntentID:  strings.Join(parts[2:len(parts)-1], ":"),
		Version:   parts[len(parts)-1],
	}
	if err := ValidateEnv(k.Env); err != nil {
		return Key{}, err
	}
	if err := ValidateOperationName(k.Operation); err != nil {
		return Key{}, err
	}
	if err := validateIntent(k.IntentID); err != nil {
		return Key{}, err
	}
	if err := ValidateVersion(k.Version); err != nil {
		return Key{}, err
	}
	return k, nil
}

// ValidateKey reports whether s is an acceptable operation key (see ParseKey).
// Beyond the grammar it refuses keys that look like they carry a secret, by
// redact.Detect's rules: a card number (13–19 digits passing the Luhn check,
// as one run or in a printed card layout such as 4111-1111-1111-1111), a
// well-known token format (sk_live_, sk_test_, rk_live_, rk_test_, whsec_,
// GitHub and Slack tokens), a JWT (eyJ….….…), or a long random-looking run
// (32+ letters and digits mixing upper case, lower case and digits; 40+ hex
// digits; 48+ letters mixed with digits). Words are not secrets:
// "order-token-77", "secret-santa-2026" and "password-reset-42" pass, as do
// UUIDs, dates and order numbers that are not card numbers.
//
// Because of the Luhn rule, an intent made of a long bare number (13–19
// digits) is refused about one time in ten: producers should not use bare
// numeric IDs of that length as intents.
func ValidateKey(s string) error {
	_, err := ParseKey(s)
	return err
}

// checkKeyString applies the whole-key rules: length, alphabet, secrets.
func checkKeyString[S ~string | ~[]byte](s S) error {
	if len(s) == 0 {
		return &KeyError{Reason: "empty"}
	}
	if len(s) > MaxKeyLen {
		return &KeyError{Reason: "longer than 255 bytes"}
	}
	for i := 0; i < len(s); i++ {
		if !isKeyByte(s[i]) {
			return &KeyError{Reason: "contains a character outside [A-Za-z0-9._~:-]"}
		}
	}
	if reason := secretReason(s); reason != "" {
		return &KeyError{Reason: reason}
	}
	return nil
}

func isKeyByte(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	case c == '.', c == '_', c == '~', c == ':', c == '-':
		return true
	}
	return false
}

// ValidateEnv checks an environment name: 1–32 of [a-z0-9-], starting with a
// letter or digit ("prod", "test", "stage-2").
func ValidateEnv(env string) error {
	if env == "" {
		return &KeyError{Part: "env", Reason: "empty"}
	}
	if len(env) > MaxEnvLen {
		return &KeyError{Part: "env", Reason: "longer than 32 bytes"}
	}
	for i := 0; i < len(env); i++ {
		c := env[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' && i > 0) {
			return &KeyError{Part: "env", Reason: "want [a-z0-9-], starting with a letter or digit"}
		}
	}
	return nil
}

// ValidateVersion checks a key version: 'v' followed by 1–9 digits without a
// leading zero ("v1", "v2", "v10"; "v0" is allowed).
func ValidateVersion(v string) error {
	if len(v) < 2 || len(v) > 10 || v[0] != 'v' {
		return &KeyError{Part: "key_version", Reason: "want 'v' followed by 1-9 digits, e.g. v1"}
	}
	for i := 1; i < len(v); i++ {
		if !isDigit(v[i]) {
			return &KeyError{Part: "key_version", Reason: "want 'v' followed by 1-9 digits, e.g. v1"}
		}
	}
	if v[1] == '0' && len(v) > 2 {
		return &KeyError{Part: "key_version", Reason: "leading zero in version number"}
	}
	return nil
}

// ValidateOperationName checks an operation type name: at most 64 bytes of
// dot-separated segments of [a-z0-9_], each starting with a letter or digit
// ("payment.charge", "crm.task.create").
func ValidateOperationName(name string) error {
	const want = "want dot-separated segments of [a-z0-9_], e.g. payment.charge"
	if name == "" {
		return &KeyError{Part: "operation", Reason: "empty"}
	}
	if len(name) > MaxOperationNameLen {
		return &KeyError{Part: "operation", Reason: "longer than 64 bytes"}
	}
	segStart := true
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			segStart = false
		case c == '_' && !segStart:
		case c == '.' && !segStart:
			segStart = true
		default:
			return &KeyError{Part: "operation", Reason: want}
		}
	}
	if segStart {
		return &KeyError{Part: "operation", Reason: want}
	}
	return nil
}

// validateIntent checks the intent part's own grammar: non-empty, key
// alphabet, and no empty ':'-separated segment.
func validateIntent(intent string) error {
	if intent == "" {
		return &KeyError{Part: "intent_id", Reason: "empty"}
	}
	for i := 0; i < len(intent); i++ {
		if !isKeyByte(intent[i]) {
			return &KeyError{Part: "intent_id", Reason: "contains a character outside [A-Za-z0-9._~:-]"}
		}
	}
	if intent[0] == ':' || intent[len(intent)-1] == ':' || strings.Contains(intent, "::") {
		return &KeyError{Part: "intent_id", Reason: "empty ':'-separated segment"}
	}
	return nil
}

// ValidateID checks an identifier that is stored and logged next to keys
// (event_id, intent_id, approval_id): 1–255 bytes of the key alphabet, with
// the same card-number and secret rules as ValidateKey. part names the field
// in the error.
func ValidateID(part, id string) error {
	if id == "" {
		return &KeyError{Part: part, Reason: "empty"}
	}
	if len(id) > MaxKeyLen {
		return &KeyError{Part: part, Reason: "longer than 255 bytes"}
	}
	for i := 0; i < len(id); i++ {
		if !isKeyByte(id[i]) {
			return &KeyError{Part: part, Reason: "contains a character outside [A-Za-z0-9._~:-]"}
		}
	}
	if reason := secretReason(id); reason != "" {
		return &KeyError{Part: part, Reason: reason}
	}
	return nil
}

// secretReason returns why s looks like it holds a secret, or "". The rules
// are redact's detector, the same that masks logs, results and webhook text.
func secretReason[S ~string | ~[]byte](s S) string {
	if k := redact.Detect(s); k != redact.KindNone {
		return "contains a " + k.String()
	}
	return ""
}

// keyReason is the safe reason of a *KeyError (or the error text otherwise).
func keyReason(err error) string {
	var ke *KeyError
	if errors.As(err, &ke) {
		return ke.Reason
	}
	return err.Error()
}

// DeriveKey returns the operation key of a command:
// <env>:<operation>:<intent_id>:<key_version>, where intent_id defaults to
// event_id and key_version to DefaultKeyVersion. When the command carries
// operation_key, that key is used: it must parse, and its env and operation
// must equal env and cmd.Operation, as must its intent and version those of
// the command when the command states them.
//
// reg nil means the default registry. Errors are *DecodeError (codes
// unknown_operation, missing_field, bad_key, key_mismatch), except an invalid
// env, which wraps ErrInvalidConfig.
func DeriveKey(env string, cmd Command, reg *Registry) (Key, error) {
	if reg == nil {
		reg = defaultRegistry
	}
	return deriveKey(env, cmd, reg)
}

func deriveKey(env string, cmd Command, reg *Registry) (Key, error) {
	if err := ValidateEnv(env); err != nil {
		return Key{}, fmt.Errorf("%w: env: %w", ErrInvalidConfig, err)
	}
	if cmd.Operation == "" {
		return Key{}, &DecodeError{Code: CodeMissingField, Field: "operation", Msg: "required"}
	}
	if reg.lookup(cmd.Operation) == nil {
		return Key{}, &DecodeError{Code: CodeUnknownOperation, Field: "operation", Msg: "not a registered operation"}
	}
	if cmd.OperationKey != "" {
		k, err := ParseKey(cmd.OperationKey)
		if err != nil {
			return Key{}, &DecodeError{Code: CodeBadKey, Field: "operation_key", Msg: keyReason(err), Err: err}
		}
		switch {
		case k.Env != env:
			return Key{}, &DecodeError{Code: CodeKeyMismatch, Field: "operation_key",
				Msg: "env part differs from this daemon's env " + env}
		case k.Operation != cmd.Operation:
			return Key{}, &DecodeError{Code: CodeKeyMismatch, Field: "operation_key",
				Msg: "operation part differs from the command's operation"}
		case cmd.IntentID != "" && k.IntentID != cmd.IntentID:
			return Key{}, &DecodeError{Code: CodeKeyMismatch, Field: "operation_key",
				Msg: "intent part differs from the command's intent_id"}
		case cmd.KeyVersion != "" && k.Version != cmd.KeyVersion:
			return Key{}, &DecodeError{Code: CodeKeyMismatch, Field: "operation_key",
				Msg: "version part differs from the command's key_version"}
		}
		return k, nil
	}
	intent, intentField := cmd.IntentID, "intent_id"
	if intent == "" {
		intent, intentField = cmd.EventID, "event_id"
	}
	if intent == "" {
		return Key{}, &DecodeError{Code: CodeMissingField, Field: "event_id", Msg: "required"}
	}
	version := cmd.KeyVersion
	if version == "" {
		version = DefaultKeyVersion
	}
	if err := ValidateVersion(version); err != nil {
		return Key{}, &DecodeError{Code: CodeBadKey, Field: "key_version", Msg: keyReason(err), Err: err}
	}
	if err := validateIntent(intent); err != nil {
		return Key{}, &DecodeError{Code: CodeBadKey, Field: intentField, Msg: keyReason(err), Err: err}
	}
	k := Key{Env: env, Operation: cmd.Operation, IntentID: intent, Version: version}
	if limit := MaxIntentLen(env, cmd.Operation, version); len(intent) > limit {
		err := &KeyError{Part: intentField, Reason: intentTooLong(limit)}
		return Key{}, &DecodeError{Code: CodeBadKey, Field: intentField, Msg: err.Reason, Err: err}
	}
	var buf [MaxKeyLen]byte
	if err := checkKeyString(k.appendTo(buf[:0])); err != nil {
		return Key{}, &DecodeError{Code: CodeBadKey, Field: intentField, Msg: keyReason(err), Err: err}
	}
	return k, nil
}

// MaxIntentLen is the longest intent id, in bytes, a command of operation
// type opType may carry under env with key version version: what the
// operation key's MaxKeyLen bytes leave beside the other parts and the
// three ':' between them. The faces state it (the MCP input schema's
// maxLength of intent_id) and the decoder enforces it, so both say one
// number.
func MaxIntentLen(env, opType, version string) int {
	if version == "" {
		version = DefaultKeyVersion
	}
	return MaxKeyLen - len(env) - len(opType) - len(version) - 3
}

func intentTooLong(limit int) string {
	return fmt.Sprintf("longer than %d bytes (the operation key <env>:<operation>:<intent_id>:<key_version> holds at most %d)", limit, MaxKeyLen)
}
