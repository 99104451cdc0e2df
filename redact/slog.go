package redact

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
)

// Secret is a string that must never be printed: a configured credential
// (an API key, a webhook signing secret, a password). Its String, GoString,
// Format, MarshalJSON, MarshalText and LogValue all give "[REDACTED]", so a
// configuration holding it can be printed, logged or dumped safely; it is
// read from configuration as a plain string (UnmarshalText). Use Reveal
// where the real value is needed (an Authorization header, say). It is the
// one secret type of idemgate: adapters and ingest configure with it.
type Secret string

// Reveal returns the secret value itself.
func (s Secret) Reveal() string { return string(s) }

// IsZero reports whether no secret is set.
func (s Secret) IsZero() bool { return s == "" }

// UnmarshalText sets the secret from configuration text, as is.
func (s *Secret) UnmarshalText(b []byte) error { *s = Secret(b); return nil }

// String returns the placeholder.
func (Secret) String() string { return Placeholder }

// GoString returns the placeholder, for %#v.
func (Secret) GoString() string { return `redact.Secret("` + Placeholder + `")` }

// Format prints the placeholder whatever the verb.
func (Secret) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, Placeholder) }

// LogValue returns the placeholder.
func (Secret) LogValue() slog.Value { return slog.StringValue(Placeholder) }

// MarshalJSON returns the placeholder as a JSON string.
func (Secret) MarshalJSON() ([]byte, error) { return []byte(strconv.Quote(Placeholder)), nil }

// MarshalText returns the placeholder.
func (Secret) MarshalText() ([]byte, error) { return []byte(Placeholder), nil }

// ReplaceAttr is a slog.HandlerOptions.ReplaceAttr that applies the redaction
// rules to every attribute:
//   - an attribute whose key IsSecretKey, or that sits in a group whose name
//     does, keeps its key and gets the value "[REDACTED]";
//   - strings (the message included) pass through String, so card numbers
//     are masked and known token formats removed;
//   - integers that hold a card number become the masked string;
//   - error values become their redacted message;
//   - json.RawMessage and []byte holding JSON are redacted by JSON and logged
//     as JSON; other []byte as redacted text;
//   - maps, slices and structs are marshalled to JSON, redacted, and logged as
//     JSON.
//
// Time, level and source attributes are left alone.
func ReplaceAttr(groups []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindGroup {
		return a // slog calls ReplaceAttr for each member
	}
	if IsSecretKey(a.Key) {
		return slog.String(a.Key, Placeholder)
	}
	for _, g := range groups {
		if IsSecretKey(g) {
			return slog.String(a.Key, Placeholder)
		}
	}
	a.Value = redactValue(a.Value)
	return a
}

func redactValue(v slog.Value) slog.Value {
	switch v.Kind() {
	case slog.KindString:
		s := v.String()
		if r := String(s); r != s {
			return slog.StringValue(r)
		}
		return v
	case slog.KindInt64:
		s := strconv.FormatInt(v.Int64(), 10)
		if m := MaskPANs(s); m != s {
			return slog.StringValue(m)
		}
		return v
	case slog.KindUint64:
		s := strconv.FormatUint(v.Uint64(), 10)
		if m := MaskPANs(s); m != s {
			return slog.StringValue(m)
		}
		return v
	case slog.KindAny:
		return redactAny(v.Any())
	default: // bool, float, duration, time, level
		return v
	}
}

func redactAny(x any) slog.Value {
	switch t := x.(type) {
	case nil:
		return slog.AnyValue(nil)
	case *slog.Source, slog.Level, slog.Leveler:
		return slog.AnyValue(x)
	case Secret:
		return slog.StringValue(Placeholder)
	case error:
		return slog.StringValue(String(t.Error()))
	case json.RawMessage:
		return slog.AnyValue(json.RawMessage(JSON(t)))
	case []byte:
		if json.Valid(t) {
			return slog.AnyValue(json.RawMessage(JSON(t)))
		}
		return slog.StringValue(String(string(t)))
	case string:
		return slog.StringValue(String(t))
	case fmt.Stringer:
		if _, isMarshaler := x.(json.Marshaler); !isMarshaler {
			return slog.StringValue(String(t.String()))
		}
	}
	b, err := json.Marshal(x)
	if err != nil {
		return slog.StringValue("[REDACTED: unloggable value]")
	}
	return slog.AnyValue(json.RawMessage(JSON(b)))
}

// NewHandler returns a slog JSON handler writing to w whose ReplaceAttr runs
// opts.ReplaceAttr (if any) and then ReplaceAttr. opts may be nil.
func NewHandler(w io.Writer, opts *slog.HandlerOptions) slog.Handler {
	var o slog.HandlerOptions
	if opts != nil {
		o = *opts
	}
	inner := o.ReplaceAttr
	o.ReplaceAttr = func(groups []string, a slog.Attr) slog.Attr {
		if inner != nil {
			a = inner(groups, a)
			if a.Equal(slog.Attr{}) {
				return a
			}
		}
		return ReplaceAttr(groups, a)
	}
	return slog.NewJSONHandler(w, &o)
}
