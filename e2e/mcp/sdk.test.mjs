// The official TypeScript SDKs drive `idemgate mcp` over Streamable HTTP:
// @modelcontextprotocol/sdk (v1, 2025-11-25 with a session) and its v2
// client, @modelcontextprotocol/client, pinned to 2026-07-28 (stateless).
// With each: the tools' schemas are valid JSON Schema that admits what the
// daemon accepts; a charge, its retry (replayed), a changed amount
// (new_intent_required), and a lost answer followed to done. Neither SDK
// speaks the Tasks extension (v2 refuses a result of type "task"), so
// neither declares it, and the lost answer is followed by polling
// get_operation, as next_action says.
//
// scripts/mcp-interop runs it (node --test) with MCP_URL (the /mcp
// endpoint) and SANDBOX_URL (the YooKassa emulator, for its faults and
// ledger).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import * as v2 from '@modelcontextprotocol/client';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

const mcpURL = process.env.MCP_URL;
const sandboxURL = process.env.SANDBOX_URL;
assert.ok(mcpURL && sandboxURL, 'MCP_URL and SANDBOX_URL must be set');

// clients: how each SDK connects, and the revision it then speaks.
const clients = {
  '@modelcontextprotocol/sdk': {
    revision: '2025-11-25',
    async connect() {
      const client = new Client({ name: 'ts-sdk-agent', version: '1.0.0' });
      await client.connect(new StreamableHTTPClientTransport(new URL(mcpURL)));
      return client;
    },
    revisionOf: (client) => client.transport.protocolVersion,
  },
  '@modelcontextprotocol/client': {
    revision: '2026-07-28',
    async connect() {
      const client = new v2.Client({ name: 'ts-client-v2-agent', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
      await client.connect(new v2.StreamableHTTPClientTransport(new URL(mcpURL)));
      return client;
    },
    revisionOf: (client) => client.getNegotiatedProtocolVersion(),
  },
};

// answer is a tool result's structured content, checked against the text.
function answer(res) {
  assert.ok(res.structuredContent, 'every tool answers with structured content');
  assert.deepEqual(JSON.parse(res.content[0].text), res.structuredContent, 'the text is the structured content');
  const a = res.structuredContent;
  assert.equal(Boolean(res.isError), ['rejected', 'conflict', 'failed_final'].includes(a.status), `isError follows the status: ${a.status}`);
  return a;
}

async function charges() {
  const r = await fetch(`${sandboxURL}/_sandbox/ledger`);
  return (await r.json()).total;
}

const charge = (intent, amount) => ({
  intent_id: intent, approval_id: 'appr-ts', account_id: 'merchant-account-17',
  order_id: `order-${intent}`, amount_minor: amount, currency: 'RUB',
});

for (const [sdk, { revision, connect, revisionOf }] of Object.entries(clients)) {
const intent = (name) => `${name}-${revision}`;

test(`${sdk}: tools list with valid JSON Schemas that admit what the daemon accepts`, async () => {
  const client = await connect();
  try {
    assert.equal(revisionOf(client), revision);
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    for (const n of ['payment_charge', 'get_operation', 'list_unresolved']) assert.ok(names.includes(n), `${n} listed`);
    const ajv = new Ajv2020({ strict: true, allErrors: true });
    addFormats(ajv);
    for (const t of tools) {
      ajv.compile(t.inputSchema); // throws on a schema that is not valid JSON Schema
      if (t.outputSchema) ajv.compile(t.outputSchema);
    }
    const pc = tools.find((t) => t.name === 'payment_charge');
    const validate = ajv.compile(pc.inputSchema);
    assert.ok(validate(charge('schema-1', 125000)), JSON.stringify(validate.errors));
    assert.equal(validate({ ...charge('schema-1', 125000), amount_minor: 1250.5 }), false, 'a decimal amount is refused');
    assert.equal(validate({ ...charge('schema-1', 125000), note: 'x' }), false, 'an unknown field is refused');
    assert.equal(pc.annotations.idempotentHint, true);
    assert.equal(pc.annotations.destructiveHint, true, 'a charge moves money');
    assert.match(pc.description, /reuse it on every retry/);
    assert.match(pc.description, /A retry of this payment MUST reuse its intent_id/);
    assert.match(pc.inputSchema.properties.intent_id.description, /reused unchanged on every retry/);
    assert.equal(tools.find((t) => t.name === 'get_operation').annotations.readOnlyHint, true);
  } finally {
    await client.close();
  }
});

test(`${sdk}: charge, retry replayed, conflict needs a new intent, a lost answer followed to done`, async () => {
  const client = await connect();
  try {
    const before = await charges();
    const first = answer(await client.callTool({ name: 'payment_charge', arguments: charge(intent('ts-1'), 125000) }));
    assert.equal(first.status, 'succeeded', first.reason);
    assert.equal(first.next_action, 'done');
    assert.equal(first.replayed, false);

    const retry = answer(await client.callTool({ name: 'payment_charge', arguments: charge(intent('ts-1'), 125000) }));
    assert.equal(retry.status, 'succeeded');
    assert.equal(retry.replayed, true, 'the retry is answered from the stored outcome');
    assert.equal(retry.target_object_id, first.target_object_id);

    const changed = answer(await client.callTool({ name: 'payment_charge', arguments: charge(intent('ts-1'), 500000) }));
    assert.equal(changed.status, 'conflict');
    assert.equal(changed.next_action, 'new_intent_required');
    assert.deepEqual(changed.conflict_fields, ['amount_minor']);
    assert.equal(await charges(), before + 1, 'one payment so far');

    // YooKassa loses the next answer: pending, then get_operation until done.
    const fault = await fetch(`${sandboxURL}/_sandbox/faults`, {
      method: 'POST', body: JSON.stringify({ kind: 'lose_response_hang', scope: 'create', count: 1 }),
    });
    assert.ok(fault.ok, `fault injected: ${fault.status}`);
    const lost = answer(await client.callTool({ name: 'payment_charge', arguments: charge(intent('ts-lost'), 99000) }));
    assert.equal(lost.status, 'pending', lost.reason);
    assert.equal(lost.next_action, 'poll');
    let got = lost;
    const deadline = Date.now() + 60_000;
    while (got.next_action === 'poll' && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, got.retry_after_ms)); // as next_action poll says
      got = answer(await client.callTool({ name: 'get_operation', arguments: { operation_key: lost.operation_key } }));
    }
    assert.equal(got.status, 'succeeded', got.reason);
    assert.equal(got.next_action, 'done');
    assert.ok(got.trail.some((s) => s.kind === 'reconcile'), 'found by the lookup, not sent again');
    assert.equal(await charges(), before + 2, 'two intents, two payments');
  } finally {
    await client.close();
  }
});
}
