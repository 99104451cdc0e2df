"""Tests of the client against a real daemon and the YooKassa emulator,
started by scripts/clients (which sets the variables below). Effects are
counted in the emulator's ledger, not in answers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import unittest
import urllib.request
from pathlib import Path
from typing import Any, Mapping, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from idemgate_client import (  # noqa: E402
    Answer,
    AwaitApprovalError,
    Client,
    FixInputError,
    NewIntentRequiredError,
    NextAction,
    new_intent_id,
)


def need(name: str) -> str:
    value = os.environ.get(name, "")
    if not value:
        raise RuntimeError(f"{name} is not set: run scripts/clients, which starts the daemon and the emulators")
    return value


def charge(order: str, minor: int) -> dict[str, Any]:
    return {"account_id": "merchant-account-17", "order_id": order, "amount_minor": minor, "currency": "RUB"}


class ClientTest(unittest.TestCase):
    client: Client
    yookassa: str

    @classmethod
    def setUpClass(cls) -> None:
        cls.client = Client(need("IDEMGATE_URL"))
        cls.yookassa = need("IDEMGATE_SANDBOX_YOOKASSA")

    def payments(self) -> int:
        with urllib.request.urlopen(self.yookassa + "/_sandbox/ledger", timeout=10) as resp:
            total: int = json.load(resp)["total"]
            return total

    def test_retry_is_answered_from_the_journal(self) -> None:
        before = self.payments()
        intent = new_intent_id("py-charge")
        first = self.client.call("payment.charge", intent, charge("py-order-1", 125_000))
        self.assertEqual(first.status, "succeeded")
        self.assertEqual(first.next_action, NextAction.DONE)
        self.assertFalse(first.replayed)
        self.assertTrue(first.target_object_id)
        again = self.client.call("payment.charge", intent, charge("py-order-1", 125_000))
        self.assertTrue(again.replayed)
        self.assertEqual(again.target_object_id, first.target_object_id)
        self.assertEqual(self.payments(), before + 1, "one payment in the ledger")
        self.assertEqual(self.client.get(first.operation_key).target_object_id, first.target_object_id)

    def test_conflict_raises_new_intent_required(self) -> None:
        intent = new_intent_id("py-conflict")
        self.client.call("payment.charge", intent, charge("py-order-2", 50_000))
        before = self.payments()
        with self.assertRaises(NewIntentRequiredError) as ctx:
            self.client.call("payment.charge", intent, charge("py-order-2", 500_000))
        answer = ctx.exception.answer
        assert answer is not None
        self.assertEqual(answer.conflict_fields, ["amount_minor"])
        self.assertEqual((answer.existing or {}).get("status"), "succeeded")
        self.assertEqual(self.payments(), before)

    def test_lost_answer_is_polled_to_done(self) -> None:
        before = self.payments()
        req = urllib.request.Request(self.yookassa + "/_sandbox/faults", method="POST",
                                     data=json.dumps({"kind": "lose_response_close", "scope": "create", "count": 1}).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            self.assertEqual(resp.status, 204)
        seen: list[str] = []

        class Counting(Client):
            def _request(self, method: str, path: str, body: Optional[bytes], headers: Mapping[str, str]) -> tuple[Answer, str]:
                seen.append(method)
                return super()._request(method, path, body, headers)

        # prefer_wait 0: the daemon answers pending at once, the client polls.
        done = Counting(need("IDEMGATE_URL")).call("payment.charge", new_intent_id("py-lost"), charge("py-order-3", 99_000),
                                                   wait=60, prefer_wait=0)
        self.assertEqual(seen[0], "POST")
        self.assertTrue(len(seen) >= 2 and all(m == "GET" for m in seen[1:]), seen)
        self.assertEqual(done.status, "succeeded")
        self.assertEqual(self.payments(), before + 1, "the payment made before the lost answer, once")
        trail = self.client.get(done.operation_key).trail
        self.assertTrue(any(step.get("kind") == "reconcile" for step in trail), trail)

    def test_bad_input_raises_fix_input(self) -> None:
        before = self.payments()
        with self.assertRaises(FixInputError) as ctx:
            self.client.call("payment.charge", new_intent_id("py-bad"), {**charge("py-order-4", 100), "currency": "RUBLES"})
        self.assertIn("currency", str(ctx.exception))
        with self.assertRaises(ValueError):
            new_intent_id("bad prefix")
        with self.assertRaises(ValueError):
            self.client.call("payment.charge", "", charge("x", 1))
        self.assertEqual(self.payments(), before)

    def test_charge_waits_for_a_person_then_charges_once(self) -> None:
        before = self.payments()
        intent = new_intent_id("py-approval")
        big = charge("py-order-5", 6_000_000)
        with self.assertRaises(AwaitApprovalError) as ctx:
            self.client.call("payment.charge", intent, big)
        self.assertTrue(ctx.exception.expires_at)
        key = ctx.exception.operation_key
        self.assertEqual(self.payments(), before, "nothing before the decision")
        subprocess.run([need("IDEMGATE_BIN"), "approve", key, "--reason", "confirmed by phone", "--as", "py-approver",
                        "--config", need("IDEMGATE_CONFIG")], check=True, capture_output=True)
        done = self.client.call("payment.charge", intent, big, wait_for_approval=True, wait=30)
        self.assertEqual(done.status, "succeeded")
        self.assertEqual(self.payments(), before + 1)

    def test_intent_ids_differ(self) -> None:
        a = new_intent_id("order-48291")
        self.assertRegex(a, r"^order-48291-[0-9a-f-]{36}$")
        self.assertNotEqual(a, new_intent_id("order-48291"))


if __name__ == "__main__":
    unittest.main()
