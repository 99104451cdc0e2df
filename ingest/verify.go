package ingest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/idemgate/idemgate/adapters/tbank/tbanktoken"
	"github.com/idemgate/idemgate/redact"
)

// Verification errors. None of them quotes a signature, a secret or the body.
var (
	// ErrSignatureMissing: the signature header or field is absent or empty.
	ErrSignatureMissing = errors.New("signature missing")
	// ErrSignatureMalformed: the signature header or field does not parse.
	ErrSignatureMalformed = errors.New("signature malformed")
	// ErrSignatureMismatch: no active secret produces the signature.
	ErrSignatureMismatch = errors.New("signature does not verify")
	// ErrTimestampOutOfTolerance: the signature verifies but its timestamp is
	// too far in the past or the future (a replay, or a skewed clock).
	ErrTimestampOutOfTolerance = errors.New("signed timestamp outside the tolerance")
	// ErrTerminalMismatch: a T-Bank notification names another terminal.
	ErrTerminalMismatch = errors.New("notification is for another terminal")
)

// StripeSignature returns the hex HMAC-SHA256 of "t.body" under secret: the
// v1 value of a Stripe-Signature header.
func StripeSignature(secret string, t int64, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(strconv.FormatInt(t, 10)))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

// VerifyStripe checks a Stripe-Signature header ("t=<unix>,v1=<hex>[,v1=…]")
// over the raw body. Any v1 signature made by any of secrets verifies (two
// appear while Stripe rolls a secret); other schemes (v0) are ignored. The
// timestamp must be within tolerance of now, either way; tolerance 0 skips
// that check.
func VerifyStripe(header string, body []byte, secrets []redact.Secret, now time.Time, tolerance time.Duration) error {
	if strings.TrimSpace(header) == "" {
		return ErrSignatureMissing
	}
	var (
		ts     int64
		haveTS bool
		sigs   [][]byte
	)
	for item := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok {
			return fmt.Errorf("%w: item without '='", ErrSignatureMalformed)
		}
		switch k {
		case "t":
			if haveTS {
				return fmt.Errorf("%w: more than one timestamp", ErrSignatureMalformed)
			}
			n, err := parseUnix(v)
			if err != nil {
				return fmt.Errorf("%w: timestamp: %w", ErrSignatureMalformed, err)
			}
			ts, haveTS = n, true
		case "v1":
			sig, err := hex.DecodeString(v)
			if err != nil || len(sig) != sha256.Size {
				continue // not a signature we could have made; another may be
			}
			sigs = append(sigs, sig)
		}
	}
	if !haveTS {
		return fmt.Errorf("%w: no timestamp", ErrSignatureMalformed)
	}
	if len(sigs) == 0 {
		return fmt.Errorf("%w: no v1 signature", ErrSignatureMissing)
	}
	return verifySigned(secrets, func(secret redact.Secret) []byte {
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(strconv.FormatInt(ts, 10)))
		mac.Write([]byte{'.'})
		mac.Write(body)
		return mac.Sum(nil)
	}, sigs, ts, now, tolerance)
}

// verifySigned checks that one of sigs is the MAC that one of keys makes
// (mac), comparing every candidate without stopping early, then that the
// signed timestamp ts is within tolerance of now.
func verifySigned[K any](keys []K, mac func(K) []byte, sigs [][]byte, ts int64, now time.Time, tolerance time.Duration) error {
	matched := false
	for _, key := range keys {
		want := mac(key)
		for _, sig := range sigs {
			if hmac.Equal(sig, want) {
				matched = true
			}
		}
	}
	if !matched {
		return ErrSignatureMismatch
	}
	return checkTolerance(ts, now, tolerance)
}

// StandardKey decodes a Standard Webhooks secret: "whsec_<base64>", or the
// bare base64 (the reference libraries accept both).
func StandardKey(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil || len(key) == 0 {
		return nil, errors.New("standard webhooks secret must be whsec_ followed by base64")
	}
	return key, nil
}

// StandardSignature returns the "v1,<base64>" signature of a Standard
// Webhooks message: HMAC-SHA256 under key over "id.timestamp.body".
func StandardSignature(key []byte, id string, timestamp int64, body []byte) string {
	return "v1," + base64.StdEncoding.EncodeToString(standardMAC(key, id, strconv.FormatInt(timestamp, 10), body))
}

func standardMAC(key []byte, id, timestamp string, body []byte) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write([]byte(timestamp))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return mac.Sum(nil)
}

// VerifyStandard checks Standard Webhooks headers over the raw body: id is
// webhook-id, timestamp webhook-timestamp (unix seconds), signatures
// webhook-signature (space-separated "v1,<base64>" entries; other versions
// such as v1a are ignored). Any entry made with any of keys verifies. The
// timestamp must be within tolerance of now, either way.
func VerifyStandard(id, timestamp, signatures string, body []byte, keys [][]byte, now time.Time, tolerance time.Duration) error {
	if id == "" || timestamp == "" || strings.TrimSpace(signatures) == "" {
		return ErrSignatureMissing
	}
	ts, err := parseUnix(timestamp)
	if err != nil {
		return fmt.Errorf("%w: webhook-timestamp: %w", ErrSignatureMalformed, err)
	}
	var sigs [][]byte
	for entry := range strings.FieldsSeq(signatures) {
		version, sig, ok := strings.Cut(entry, ",")
		if !ok || version != "v1" {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(sig)
		if err != nil || len(raw) != sha256.Size {
			continue
		}
		sigs = append(sigs, raw)
	}
	if len(sigs) == 0 {
		return fmt.Errorf("%w: no v1 signature", ErrSignatureMissing)
	}
	return verifySigned(keys, func(key []byte) []byte { return standardMAC(key, id, timestamp, body) }, sigs, ts, now, tolerance)
}

// TBankToken returns T-Bank's Token over a notification's fields: the rule
// the adapter signs its requests with (tbanktoken.Of), held once.
func TBankToken(fields map[string]any, password string) string {
	return tbanktoken.Of(fields, password)
}

// VerifyTBank checks a parsed T-Bank notification: its Token must be the
// TBankToken of its fields under one of passwords, and its TerminalKey must
// be terminalKey.
func VerifyTBank(fields map[string]any, terminalKey string, passwords []redact.Secret) error {
	tok, present := fields["Token"]
	if !present {
		return ErrSignatureMissing
	}
	s, ok := tok.(string)
	if !ok || s == "" {
		return fmt.Errorf("%w: Token must be a non-empty string", ErrSignatureMalformed)
	}
	got, err := hex.DecodeString(s)
	if err != nil || len(got) != sha256.Size {
		return fmt.Errorf("%w: Token must be 64 hex digits", ErrSignatureMalformed)
	}
	matched := false
	for _, pw := range passwords {
		want, _ := hex.DecodeString(TBankToken(fields, string(pw)))
		if hmac.Equal(got, want) {
			matched = true
		}
	}
	if !matched {
		return ErrSignatureMismatch
	}
	if tk, _ := fields["TerminalKey"].(string); !hmac.Equal([]byte(tk), []byte(terminalKey)) {
		return ErrTerminalMismatch
	}
	return nil
}

// parseUnix parses unix seconds: 1–19 decimal digits, no sign, no leading
// zero (so the signed text is the number's one spelling).
func parseUnix(s string) (int64, error) {
	if s == "" || len(s) > 19 || (s[0] == '0' && len(s) > 1) {
		return 0, errors.New("want unix seconds")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, errors.New("want unix seconds")
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, errors.New("want unix seconds")
	}
	return n, nil
}

// checkTolerance reports whether unix time ts is within tolerance of now.
func checkTolerance(ts int64, now time.Time, tolerance time.Duration) error {
	if tolerance <= 0 {
		return nil
	}
	nowS, tol := now.Unix(), int64(tolerance/time.Second)
	if ts < nowS-tol || ts > nowS+tol {
		return ErrTimestampOutOfTolerance
	}
	return nil
}
