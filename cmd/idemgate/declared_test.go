package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/sandbox"
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
	routes, err := buildAdapters(c, quietLog(), nil)
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

// TestDocsDeclaredExample: the worked example of docs/declared-targets.md
// loads as it is written, its generic emulator comes from the same declaration, and the
// adapter it builds keeps one shipment per key against it: a repeat is a
// replay of the same object, another payload under the key a mismatch,
// and a lookup by the key alone finds the shipment.
func TestDocsDeclaredExample(t *testing.T) {
	blocks := codeBlocks(docPage(t, "declared-targets.md"), "yaml")
	require.Len(t, blocks, 1)
	yaml := blocks[0]
	c, err := loadConfig(flagsWith(t, "--config", writeConfig(t, yaml)))
	require.NoError(t, err)
	require.NoError(t, c.validate())
	emus, err := declaredEmulators(c, sandbox.Options{})
	require.NoError(t, err)
	require.Len(t, emus, 1)
	url, err := emus[0].Start("")
	require.NoError(t, err)
	t.Cleanup(func() { _ = emus[0].Close() })

	require.Contains(t, yaml, "base_url: https://wms.example.com")
	c, err = loadConfig(flagsWith(t, "--config", writeConfig(t, strings.Replace(yaml, "https://wms.example.com", url, 1))))
	require.NoError(t, err)
	t.Setenv("IDEMGATE_WAREHOUSE_TOKEN", "sandbox_warehouse_token")
	routes, err := buildAdapters(c, quietLog(), nil)
	require.NoError(t, err)
	a := routes["shipment.create"]
	require.NotNil(t, a)
	reg, err := c.registry()
	require.NoError(t, err)
	dec := operation.Decoder{Env: "test", Registry: reg}
	cmd := func(qty int) operation.Operation {
		op, err := dec.Decode([]byte(fmt.Sprintf(`{"event_id":"e1","operation":"shipment.create","intent_id":"so-1001","payload":{"order_id":"SO-1001","quantity":%d,"declared_value":125000,"currency":"rub","comment":"back door"}}`, qty)))
		require.NoError(t, err)
		return op
	}
	op := cmd(3)
	first, err := a.Execute(t.Context(), op)
	require.NoError(t, err)
	again, err := a.Execute(t.Context(), op)
	require.NoError(t, err)
	require.Equal(t, first.ObjectID, again.ObjectID)
	require.Equal(t, 1, emus[0].Effects(op.Key.String()))
	_, err = a.Execute(t.Context(), cmd(4))
	require.ErrorContains(t, err, adapters.CodeKeyPayloadMismatch)
	require.Equal(t, 1, emus[0].TotalEffects())
	keyOnly := op
	keyOnly.Fields, keyOnly.Extra = nil, nil
	lr, err := a.Lookup(t.Context(), keyOnly)
	require.NoError(t, err)
	require.Equal(t, adapters.Found, lr.Status)
	require.Equal(t, first.ObjectID, lr.Outcome.ObjectID)
}
