package main

import (
	"bytes"
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const declaredType = `
operations:
  shipment.create:
    target_system: warehouse
    fields:
      - {name: order_id, kind: string, required: true}
      - {name: quantity, kind: integer, required: true}
      - {name: comment, kind: string, free_text: true}
routes:
  shipment.create: wms
`

const declaredTarget = `
adapters:
  http:
    wms:
      target_system: warehouse
      base_url: http://127.0.0.1:1
      auth: {scheme: bearer, secret_env: IDEMGATE_TEST_WMS_TOKEN}
      key: {in: header, name: Idempotency-Key}
      execute:
        url: /shipments
        body: '{"order": "${payload.order_id}", "qty": "${payload.quantity}", "note": "${payload.comment}", "meta": {"op": "${key}"}}'
        object_id: id
      lookup:
        - {mode: search, url: "/shipments?meta.op=${key}", items: data, key_path: meta.op}
      capabilities: {native_key: true}
`

// TestDeclaredTypeAndTargetLoad: a declared type and target load from
// the file, the type is routed to the target and the adapter builds with
// the credential from the environment.
func TestDeclaredTypeAndTargetLoad(t *testing.T) {
	t.Setenv("IDEMGATE_TEST_WMS_TOKEN", "wms-secret-token-1")
	c, err := loadConfig(flagsWith(t, "--config", writeConfig(t, declaredType+declaredTarget)))
	require.NoError(t, err)
	require.NoError(t, c.validate())
	reg, err := c.registry()
	require.NoError(t, err)
	typ, ok := reg.Lookup("shipment.create")
	require.True(t, ok)
	require.Equal(t, []string{"comment"}, typ.FreeTextFields())
	routes, err := buildAdapters(c, quietLog())
	require.NoError(t, err)
	require.Equal(t, "warehouse", routes["shipment.create"].TargetSystem())
	require.True(t, routes["shipment.create"].Capabilities().NativeKey)
}

// TestUnsafeDeclarationsExit78: each unsafe or ill-formed declaration
// stops `idemgate run` at start with exit 78 and a message naming it;
// no command shows a credential.
func TestUnsafeDeclarationsExit78(t *testing.T) {
	t.Setenv("IDEMGATE_TEST_WMS_TOKEN", "wms-secret-token-1")
	cases := map[string]struct{ yaml, want string }{
		"unknown kind": {strings.Replace(declaredType, "kind: integer", "kind: float", 1) + declaredTarget,
			`operations.shipment.create.fields.quantity: unknown kind "float"`},
		"free text significant": {strings.Replace(declaredType, "free_text: true", "free_text: true, significant: true", 1) + declaredTarget,
			"operations.shipment.create.fields.comment is free text marked significant"},
		"no significant field": {strings.NewReplacer("required: true}", "required: true, significant: false}").Replace(declaredType) + declaredTarget,
			"operations.shipment.create has no significant field"},
		"no key placement": {declaredType + strings.Replace(declaredTarget, "key: {in: header, name: Idempotency-Key}", "key: {name: Idempotency-Key}", 1),
			"adapters.http.wms: key.in is missing"},
		"no lookup": {declaredType + strings.Replace(declaredTarget, `        - {mode: search, url: "/shipments?meta.op=${key}", items: data, key_path: meta.op}`, "", 1),
			"adapters.http.wms: lookup is missing"},
		"free text in the URL": {declaredType + strings.Replace(declaredTarget, "url: /shipments\n", "url: /shipments/${payload.comment}\n", 1),
			"${payload.comment} is free text"},
		"inline secret": {declaredType + strings.Replace(declaredTarget, "secret_env: IDEMGATE_TEST_WMS_TOKEN", "secret: wms-inline-secret", 1),
			"secret"},
		"another target class": {strings.Replace(declaredType, "target_system: warehouse", "target_system: crm", 1) + declaredTarget,
			"adapter \"wms\" serves warehouse targets"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := writeConfig(t, "data_dir: "+t.TempDir()+"\nadmin:\n  addr: \"\"\n"+tc.yaml)
			var stdout, stderr bytes.Buffer
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // a daemon that got past the configuration stops at once
			code := run(ctx, []string{"run", "--config", p}, &stdout, &stderr)
			require.Equal(t, exitConfig, code, "stderr: %s", stderr.String())
			require.Contains(t, stderr.String(), tc.want)
			require.NotContains(t, stderr.String()+stdout.String(), "wms-secret-token-1")
			require.NotContains(t, stderr.String()+stdout.String(), "wms-inline-secret")
		})
	}
}

// TestSandboxServesDeclaredTarget: `idemgate sandbox --config` starts a
// generic emulator for a declared target beside the built-in ones; it
// honours the declared key (a repeat makes no second effect).
func TestSandboxServesDeclaredTarget(t *testing.T) {
	t.Parallel()
	p := writeConfig(t, declaredType+declaredTarget)
	urls, banner, stop := startSandboxCmd(t, "--config", p)
	u, ok := urls["wms"]
	require.True(t, ok, banner)
	require.Contains(t, banner, "set adapters.http.wms.base_url to "+u)
	tok := regexp.MustCompile(`token=(sandbox_wms_token)`).FindStringSubmatch(banner)
	require.NotNil(t, tok, banner)
	for range 2 {
		req, err := http.NewRequest(http.MethodPost, u+"/shipments", strings.NewReader(`{"order":"SO-1","qty":2,"meta":{"op":"k-1"}}`))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+tok[1])
		req.Header.Set("Idempotency-Key", "k-1")
		resp, err := httpClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Contains(t, []int{http.StatusOK, http.StatusCreated}, resp.StatusCode)
	}
	require.Contains(t, httpGet(t, u+"/_sandbox/ledger?key=k-1"), `"count":1`)
	require.Equal(t, exitOK, stop())
}
