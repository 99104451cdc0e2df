// Package tbanktoken holds T-Bank's request and notification signature
// rule (the Token field) once, for the adapter that signs its requests and
// for ingest, which checks T-Bank's notifications. The emulator in
// sandbox/tbank keeps its own copy on purpose: it checks the adapter from
// outside.
//
// Imports: the standard library only.
package tbanktoken

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
)

// Of is T-Bank's Token over a request or a notification (T-Bank's API
// documentation [OK]): the values of the root-level scalar parameters (Token itself,
// nested objects, arrays and nulls left out) plus {"Password": password},
// sorted by parameter name, concatenated; hex SHA-256. Numbers keep their
// literal JSON text when they are json.Number; booleans are "true" and
// "false". The adapter signs its requests with it, and ingest checks
// T-Bank's notifications with it.
func Of(params map[string]any, password string) string {
	keys := make([]string, 0, len(params)+1)
	for k, v := range params {
		if k == "Token" || k == "Password" {
			continue
		}
		if _, ok := paramText(v); ok {
			keys = append(keys, k)
		}
	}
	keys = append(keys, "Password")
	slices.Sort(keys)
	h := sha256.New()
	for _, k := range keys {
		if k == "Password" {
			h.Write([]byte(password))
			continue
		}
		s, _ := paramText(params[k])
		h.Write([]byte(s))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// paramText is the text a scalar parameter contributes to a Token. The
// adapter builds its parameters from Go values (int64 amounts among them),
// ingest from decoded JSON (json.Number), so both kinds are read.
//
// ingest's mapping has a rule of the same shape (scalarText, behind
// convert: string) that is not this one: that is idemgate's own conversion
// of a webhook field, this is T-Bank's signature, which T-Bank defines. They
// agree today on a JSON string, number and boolean, but each must change
// only with its own owner: a mapping that learned to turn null into "" must
// not change which parameters a Token covers, nor T-Bank's rule a mapping.
func paramText(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case json.Number:
		return v.String(), true
	case bool:
		return strconv.FormatBool(v), true
	case int:
		return strconv.Itoa(v), true
	case int64:
		return strconv.FormatInt(v, 10), true
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), true
	}
	return "", false
}
