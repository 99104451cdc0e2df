package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/cmd/idemgate/internal/sandboxes"
	"github.com/idemgate/idemgate/sandbox"
)

// startSandboxJSON runs `idemgate sandbox --json args...` and returns the
// listing it printed first, and a stop function returning the exit code.
func startSandboxJSON(t *testing.T, args ...string) (sandboxes.Listing, func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	pr, pw := io.Pipe()
	code := make(chan int, 1)
	go func() {
		c := run(ctx, append([]string{"sandbox", "--quiet", "--json"}, args...), pw, io.Discard)
		_ = pw.CloseWithError(io.EOF)
		code <- c
	}()
	var l sandboxes.Listing
	dec := json.NewDecoder(pr)
	dec.DisallowUnknownFields()
	dec.UseNumber()
	require.NoError(t, dec.Decode(&l), "stdout starts with the JSON listing")
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	return l, func() int {
		cancel()
		select {
		case c := <-code:
			return c
		case <-time.After(30 * time.Second):
			t.Fatal("idemgate sandbox --json did not stop on cancel")
			return -1
		}
	}
}

// TestSandboxJSON: `idemgate sandbox --json` describes every started
// emulator, the built-in ones and a declared target's, as one JSON
// document: its URL answers, each credential is typed by the adapter
// configuration that holds it (a secret by its word, else an identifier),
// the secret ones are exactly the adapters' credential types, and the
// adapter blocks make a configuration that loads with those credentials.
func TestSandboxJSON(t *testing.T) {
	t.Parallel()
	l, stop := startSandboxJSON(t, "--config", writeConfig(t, declaredType+declaredTarget))
	all, err := sandboxes.All(sandbox.Options{})
	require.NoError(t, err)
	var names []string
	for _, e := range l.Emulators {
		names = append(names, e.Name)
	}
	require.ElementsMatch(t, append(all.Names(), "wms"), names)
	require.True(t, sort.StringsAreSorted(names), names)

	// The secrets are what the adapters hold as credential types
	// (adapters.Token, Password, SecretKey, WebhookCode); a declared
	// target's is its bearer token.
	wantSecret := map[string]string{"yookassa": "secret_key", "tbank": "password", "stripe": "secret_key",
		"onec": "password", "bitrix24": "webhook_code", "amocrm": "token", "wms": "token"}
	var adaptersYAML strings.Builder
	adaptersYAML.WriteString("adapters:\n")
	for _, e := range l.Emulators {
		require.Equal(t, e.URL+"/_sandbox", e.Admin)
		require.Contains(t, httpGet(t, e.Admin+"/ledger"), fmt.Sprintf(`"target":%q`, e.Name))
		require.NotEmpty(t, e.Endpoints, e.Name)
		var secrets []string
		for _, c := range e.Credentials {
			require.NotEmpty(t, c.Value, "%s.%s", e.Name, c.Name)
			if c.Secret {
				require.Equal(t, c.Name, c.Type, "%s.%s: a secret is typed by its word", e.Name, c.Name)
				secrets = append(secrets, c.Name)
			} else {
				require.Equal(t, "identifier", c.Type, "%s.%s", e.Name, c.Name)
			}
			if e.Adapter != nil {
				require.EqualValues(t, fmt.Sprint(e.Adapter[c.Name]), c.Value, "%s: the adapter block holds %s", e.Name, c.Name)
			}
		}
		require.Equal(t, []string{wantSecret[e.Name]}, secrets, e.Name)
		if e.Name == "wms" {
			require.Nil(t, e.Adapter, "a declared target's block is its declaration")
			continue
		}
		fmt.Fprintf(&adaptersYAML, "  %s:\n", e.Name)
		for k, v := range e.Adapter {
			b, err := json.Marshal(v)
			require.NoError(t, err)
			fmt.Fprintf(&adaptersYAML, "    %s: %s\n", k, b)
		}
	}
	c, err := loadConfig(flagsWith(t, "--config", writeConfig(t, adaptersYAML.String())))
	require.NoError(t, err)
	require.NoError(t, c.validate())
	byName := map[string]sandboxes.EmulatorJSON{}
	for _, e := range l.Emulators {
		byName[e.Name] = e
	}
	require.Equal(t, byName["yookassa"].URL, c.Adapters.YooKassa.BaseURL)
	require.Equal(t, byName["yookassa"].Adapter["secret_key"], string(c.Adapters.YooKassa.SecretKey.Value))
	require.Equal(t, byName["bitrix24"].Adapter["webhook_code"], string(c.Adapters.Bitrix24.WebhookCode.Value))
	require.Equal(t, byName["amocrm"].Adapter["key_field_id"], json.Number(fmt.Sprint(c.Adapters.AmoCRM.KeyFieldID)))

	// The typed credentials work: YooKassa takes them and counts the payment.
	y := byName["yookassa"]
	req, err := http.NewRequest(http.MethodPost, y.URL+"/v3/payments", strings.NewReader(
		`{"amount":{"value":"10.00","currency":"RUB"},"capture":true,"payment_method_id":"pm-1","description":"manual"}`))
	require.NoError(t, err)
	req.SetBasicAuth(y.Adapter["shop_id"].(string), y.Adapter["secret_key"].(string))
	req.Header.Set("Idempotence-Key", "json-1")
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, httpGet(t, y.Admin+"/ledger?key=json-1"), `"count":1`)
	require.Equal(t, exitOK, stop())
}

// TestCredentialType: a credential is typed by the field of the adapter's
// configuration that holds it, and one the configuration does not hold is
// taken for a secret.
func TestCredentialType(t *testing.T) {
	for _, c := range []struct {
		target, credential, typ string
		secret                  bool
	}{
		{"yookassa", "secret_key", "secret_key", true},
		{"yookassa", "shop_id", "identifier", false},
		{"tbank", "password", "password", true},
		{"tbank", "terminal_key", "identifier", false},
		{"onec", "user", "identifier", false},
		{"bitrix24", "webhook_code", "webhook_code", true},
		{"bitrix24", "user_id", "identifier", false},
		{"amocrm", "token", "token", true},
		{"amocrm", "key_field_id", "identifier", false},
		{"stripe", "secret_key", "secret_key", true},
		{"yookassa", "no_such_key", "secret", true},
		{"wms", "token", "token", true},
	} {
		typ, secret := credentialType(c.target, c.credential)
		require.Equal(t, c.typ, typ, "%s.%s", c.target, c.credential)
		require.Equal(t, c.secret, secret, "%s.%s", c.target, c.credential)
	}
}
