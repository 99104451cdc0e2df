// Tests of the client against a real daemon and the YooKassa emulator,
// started by scripts/clients (which sets the variables below). Effects are
// counted in the emulator's ledger, not in answers.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";

import {
  Client, newIntentId, NextAction,
  AwaitApprovalError, FixInputError, NewIntentRequiredError,
} from "../src/index.js";

const need = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run scripts/clients, which starts the daemon and the emulators`);
  return v;
};
const api = need("IDEMGATE_URL");
const yookassa = need("IDEMGATE_SANDBOX_YOOKASSA");
const client = new Client({ baseUrl: api });

async function payments() {
  const res = await fetch(`${yookassa}/_sandbox/ledger`);
  assert.equal(res.status, 200);
  return (await res.json()).total;
}

const charge = (order, minor) => ({ account_id: "merchant-account-17", order_id: order, amount_minor: minor, currency: "RUB" });

test("one intent, one charge: a retry is answered from the journal", async () => {
  const before = await payments();
  const intent = newIntentId("ts-charge");
  const first = await client.call("payment.charge", intent, charge("ts-order-1", 125_000));
  assert.equal(first.status, "succeeded");
  assert.equal(first.next_action, NextAction.DONE);
  assert.equal(first.replayed, false);
  assert.ok(first.target_object_id);
  const again = await client.call("payment.charge", intent, charge("ts-order-1", 125_000));
  assert.equal(again.replayed, true);
  assert.equal(again.target_object_id, first.target_object_id);
  assert.equal(await payments(), before + 1, "one payment in the ledger");
  const read = await client.get(first.operation_key);
  assert.equal(read.target_object_id, first.target_object_id);
});

test("the same intent id with another amount: new_intent_required, nothing charged", async () => {
  const intent = newIntentId("ts-conflict");
  await client.call("payment.charge", intent, charge("ts-order-2", 50_000));
  const before = await payments();
  await assert.rejects(client.call("payment.charge", intent, charge("ts-order-2", 500_000)), (err) => {
    assert.ok(err instanceof NewIntentRequiredError, err);
    assert.deepEqual(err.answer.conflict_fields, ["amount_minor"]);
    assert.equal(err.answer.existing.status, "succeeded");
    return true;
  });
  assert.equal(await payments(), before);
});

test("a lost answer from the provider is looked up and polled to done", async () => {
  const before = await payments();
  const res = await fetch(`${yookassa}/_sandbox/faults`, {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ kind: "lose_response_close", scope: "create", count: 1 }),
  });
  assert.equal(res.status, 204);
  const intent = newIntentId("ts-lost");
  const seen = [];
  const counting = new Client({ baseUrl: api, fetch: (url, init) => { seen.push(init.method); return fetch(url, init); } });
  // preferWaitS 0: the daemon answers pending at once, the client polls.
  const done = await counting.call("payment.charge", intent, charge("ts-order-3", 99_000), { waitMs: 60_000, preferWaitS: 0 });
  assert.equal(seen[0], "POST");
  assert.ok(seen.slice(1).every((m) => m === "GET") && seen.length >= 2, `polled: ${seen}`);
  assert.equal(done.status, "succeeded");
  assert.equal(await payments(), before + 1, "the payment made before the lost answer, once");
  const read = await client.get(done.operation_key);
  assert.ok(read.trail.some((s) => s.kind === "reconcile"), JSON.stringify(read.trail));
});

test("bad input raises fix_input, nothing charged", async () => {
  const before = await payments();
  await assert.rejects(client.call("payment.charge", newIntentId("ts-bad"), { ...charge("ts-order-4", 100), currency: "RUBLES" }),
    (err) => err instanceof FixInputError && /currency/.test(err.message));
  assert.throws(() => newIntentId("bad prefix"), TypeError);
  await assert.rejects(client.call("payment.charge", "", charge("x", 1)), TypeError);
  assert.equal(await payments(), before);
});

test("a charge above the threshold waits for a person, then charges once", async () => {
  const before = await payments();
  const intent = newIntentId("ts-approval");
  const big = charge("ts-order-5", 6_000_000);
  let key = "";
  await assert.rejects(client.call("payment.charge", intent, big), (err) => {
    assert.ok(err instanceof AwaitApprovalError, err);
    assert.ok(err.expiresAt);
    key = err.operationKey;
    return true;
  });
  assert.equal(await payments(), before, "nothing before the decision");
  execFileSync(need("IDEMGATE_BIN"), ["approve", key, "--reason", "confirmed by phone", "--as", "ts-approver", "--config", need("IDEMGATE_CONFIG")]);
  const done = await client.call("payment.charge", intent, big, { waitForApproval: true, waitMs: 30_000 });
  assert.equal(done.status, "succeeded");
  assert.equal(await payments(), before + 1);
});

test("intent ids are made once and differ", () => {
  const a = newIntentId("order-48291");
  assert.match(a, /^order-48291-[0-9a-f-]{36}$/);
  assert.notEqual(a, newIntentId("order-48291"));
});
