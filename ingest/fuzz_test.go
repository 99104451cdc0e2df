package ingest_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/ingest"
	"github.com/idemgate/idemgate/redact"
)

const fuzzTolerance = 5 * time.Minute

// FuzzStripeSignatureHeader: VerifyStripe never panics, never accepts a
// header without a genuine v1 signature over a fresh timestamp, and always
// accepts a genuine one (and refuses it over another body).
func FuzzStripeSignatureHeader(f *testing.F) {
	secrets := []redact.Secret{stripeOld, stripeNew}
	body := []byte(`{"id":"evt_1","type":"payment_intent.succeeded"}`)
	f.Add(stripeHeader(stripeNew, fixedNow, body).Get("Stripe-Signature"), body)
	f.Add(fmt.Sprintf("t=%d,v1=%s,v0=00", fixedNow.Unix(), strings.Repeat("ab", 32)), body)
	f.Add("t=,v1=", []byte("{}"))
	f.Add("t=1,t=2", []byte(""))
	f.Add(",,,=,t==,v1==", []byte("x"))
	f.Add(fmt.Sprintf("t=%d,v1=%s", int64(1)<<62, strings.Repeat("0", 64)), body)
	f.Fuzz(func(t *testing.T, header string, body []byte) {
		err := ingest.VerifyStripe(header, body, secrets, fixedNow, fuzzTolerance)
		if err == nil && !genuineStripe(header, body, secrets) {
			t.Fatalf("accepted a header with no genuine fresh signature: %q", header)
		}
		// A genuine signature verifies, and not over another body.
		good := fmt.Sprintf("t=%d,v1=%s", fixedNow.Unix(), ingest.StripeSignature(stripeOld, fixedNow.Unix(), body))
		if err := ingest.VerifyStripe(good, body, secrets, fixedNow, fuzzTolerance); err != nil {
			t.Fatalf("genuine signature refused: %v", err)
		}
		if err := ingest.VerifyStripe(good, append(bytes.Clone(body), ' '), secrets, fixedNow, fuzzTolerance); err == nil {
			t.Fatal("signature accepted over another body")
		}
	})
}

// genuineStripe is an independent oracle: one t item, fresh, and a v1 item
// equal to the HMAC of "t.body" under one of the secrets.
func genuineStripe(header string, body []byte, secrets []redact.Secret) bool {
	var ts []string
	var sigs []string
	for _, item := range strings.Split(header, ",") {
		item = strings.TrimSpace(item)
		switch {
		case strings.HasPrefix(item, "t="):
			ts = append(ts, item[2:])
		case strings.HasPrefix(item, "v1="):
			sigs = append(sigs, strings.ToLower(item[3:]))
		}
	}
	if len(ts) != 1 {
		return false
	}
	n, err := strconv.ParseInt(ts[0], 10, 64)
	if err != nil || n < fixedNow.Unix()-300 || n > fixedNow.Unix()+300 || strconv.FormatInt(n, 10) != ts[0] {
		return false
	}
	for _, s := range secrets {
		want := hexHMAC([]byte(s), ts[0]+"."+string(body))
		for _, sig := range sigs {
			if sig == want {
				return true
			}
		}
	}
	return false
}

// FuzzStandardWebhooksHeader: VerifyStandard never panics, never accepts
// headers without a genuine v1 signature over "id.timestamp.body" with a
// fresh timestamp, and always accepts a genuine one.
func FuzzStandardWebhooksHeader(f *testing.F) {
	keys := [][]byte{mustStandardKey(standardOld), mustStandardKey(standardNew)}
	body := []byte(`{"type":"invoice.paid"}`)
	h := standardHeaders(standardNew, "msg_1", fixedNow, body)
	f.Add(h.Get("Webhook-Id"), h.Get("Webhook-Timestamp"), h.Get("Webhook-Signature"), body)
	f.Add("msg_1", strconv.FormatInt(fixedNow.Unix(), 10), "v1,"+strings.Repeat("A", 44)+" v1a,xyz", body)
	f.Add("", "", "", []byte{})
	f.Add("id", "-1", "v1,", []byte("{}"))
	f.Add("id", "99999999999999999999", "v1,,v1", []byte("{}"))
	f.Fuzz(func(t *testing.T, id, timestamp, signature string, body []byte) {
		err := ingest.VerifyStandard(id, timestamp, signature, body, keys, fixedNow, fuzzTolerance)
		if err == nil && !genuineStandard(id, timestamp, signature, body, keys) {
			t.Fatalf("accepted headers with no genuine fresh signature: id=%q ts=%q sig=%q", id, timestamp, signature)
		}
		if id == "" {
			return
		}
		good := ingest.StandardSignature(keys[0], id, fixedNow.Unix(), body)
		ts := strconv.FormatInt(fixedNow.Unix(), 10)
		if err := ingest.VerifyStandard(id, ts, good, body, keys, fixedNow, fuzzTolerance); err != nil {
			t.Fatalf("genuine signature refused: %v", err)
		}
		if err := ingest.VerifyStandard(id+"x", ts, good, body, keys, fixedNow, fuzzTolerance); err == nil {
			t.Fatal("signature accepted for another id")
		}
	})
}

func genuineStandard(id, timestamp, signature string, body []byte, keys [][]byte) bool {
	n, err := strconv.ParseInt(timestamp, 10, 64)
	if id == "" || err != nil || n < fixedNow.Unix()-300 || n > fixedNow.Unix()+300 || strconv.FormatInt(n, 10) != timestamp {
		return false
	}
	for _, k := range keys {
		want := b64HMAC(k, id+"."+timestamp+"."+string(body))
		for _, entry := range strings.Fields(signature) {
			if v, sig, ok := strings.Cut(entry, ","); ok && v == "v1" {
				raw, err := base64.StdEncoding.DecodeString(sig)
				if err == nil && base64.StdEncoding.EncodeToString(raw) == want {
					return true
				}
			}
		}
	}
	return false
}

// FuzzTBankToken: VerifyTBank never panics, never accepts a notification
// whose Token is not the documented token under an active password (or that
// names another terminal), and accepts one signed properly.
func FuzzTBankToken(f *testing.F) {
	passwords := []redact.Secret{tbankPwdOld, tbankPwdNew}
	f.Add(tbankNotification(tbankPwdNew, nil))
	f.Add(tbankNotification("guess", nil))
	f.Add([]byte(`{"Token":"00","TerminalKey":"TestTerminal"}`))
	f.Add([]byte(`{"Token":null,"Amount":1e400}`))
	f.Add([]byte(`{"TerminalKey":"TestTerminal","Password":"x","Token":"` + strings.Repeat("a", 64) + `"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		var doc map[string]any
		if dec.Decode(&doc) != nil || doc == nil {
			return
		}
		err := ingest.VerifyTBank(doc, tbankTerm, passwords)
		if err == nil {
			tok, _ := doc["Token"].(string)
			tk, _ := doc["TerminalKey"].(string)
			ok := false
			for _, pw := range passwords {
				if strings.EqualFold(tok, tokenByHand(doc, string(pw))) {
					ok = true
				}
			}
			if !ok || tk != tbankTerm {
				t.Fatalf("accepted a notification without a genuine token: %s", body)
			}
		}
		// Properly signed, it verifies; with one more signed field, it does not.
		doc["TerminalKey"] = tbankTerm
		doc["Token"] = tokenByHand(doc, tbankPwdNew)
		if err := ingest.VerifyTBank(doc, tbankTerm, passwords); err != nil {
			t.Fatalf("genuine token refused: %v", err)
		}
		if _, exists := doc["ZZExtra"]; !exists {
			doc["ZZExtra"] = "1"
			if err := ingest.VerifyTBank(doc, tbankTerm, passwords); err == nil {
				t.Fatal("token accepted after a signed field was added")
			}
		}
	})
}
