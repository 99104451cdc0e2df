"""The client: Client.call follows an answer to a final outcome or raises a
typed error for the next action the caller must take."""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional


class NextAction:
    """The next actions an answer can carry."""

    DONE = "done"
    POLL = "poll"
    AWAIT_APPROVAL = "await_approval"
    RETRY_SAME_INTENT = "retry_same_intent"
    FIX_INPUT = "fix_input"
    NEW_INTENT_REQUIRED = "new_intent_required"
    HUMAN_REVIEW = "human_review"


@dataclass(frozen=True)
class ApprovalWait:
    """While an intent waits for a person: until when, and where to decide."""

    expires_at: str
    url: str = ""
    approvers: int = 0
    approved: int = 0


@dataclass(frozen=True)
class Answer:
    """idemgate's answer (the HTTP API's answer schema, GET /v1/openapi.json).

    A Go test (clients_test.go) keeps the fields equal to the schema."""

    status: str
    operation_key: str
    replayed: bool
    target_object_id: str
    error_code: str
    reason: str
    retry_after_ms: int
    next_action: str
    operation: str = ""
    target_system: str = ""
    conflict_fields: list[str] = field(default_factory=list)
    existing: Optional[dict[str, Any]] = None
    approval: Optional[ApprovalWait] = None
    attempts: int = 0
    result: Optional[dict[str, Any]] = None
    journal_status: str = ""
    trail: list[dict[str, Any]] = field(default_factory=list)

    @staticmethod
    def from_json(doc: Mapping[str, Any]) -> "Answer":
        """Reads an answer document; unknown members are ignored."""
        approval = doc.get("approval")
        return Answer(
            status=str(doc.get("status", "")),
            operation_key=str(doc.get("operation_key", "")),
            replayed=bool(doc.get("replayed", False)),
            target_object_id=str(doc.get("target_object_id", "")),
            error_code=str(doc.get("error_code", "")),
            reason=str(doc.get("reason", "")),
            retry_after_ms=int(doc.get("retry_after_ms", 0)),
            next_action=str(doc.get("next_action", "")),
            operation=str(doc.get("operation", "")),
            target_system=str(doc.get("target_system", "")),
            conflict_fields=list(doc.get("conflict_fields") or []),
            existing=doc.get("existing"),
            approval=ApprovalWait(
                expires_at=str(approval.get("expires_at", "")),
                url=str(approval.get("url", "")),
                approvers=int(approval.get("approvers", 0)),
                approved=int(approval.get("approved", 0)),
            )
            if isinstance(approval, dict)
            else None,
            attempts=int(doc.get("attempts", 0)),
            result=doc.get("result"),
            journal_status=str(doc.get("journal_status", "")),
            trail=list(doc.get("trail") or []),
        )


class IdemgateError(Exception):
    """Base of every error this client raises; answer is idemgate's answer
    (None when there is none, e.g. a wrong token)."""

    def __init__(self, message: str, answer: Optional[Answer] = None, http_status: int = 0) -> None:
        super().__init__(message)
        self.answer = answer
        self.http_status = http_status
        self.operation_key = answer.operation_key if answer else ""


class FixInputError(IdemgateError):
    """Rejected before anything ran: fix the field the reason names and call
    again (the same intent id may be reused)."""


class NewIntentRequiredError(IdemgateError):
    """This intent id cannot do it (another payload under it, a
    cancellation, a denied or expired approval). A changed request is a new
    intent with a new id."""


class HumanReviewError(IdemgateError):
    """A person must look: an outcome the target could not confirm, or a
    final refusal from the target."""


class AwaitApprovalError(IdemgateError):
    """The intent waits for a person's approval; nothing ran. approval_url is
    where a person decides, expires_at when the wait ends."""

    def __init__(self, message: str, answer: Optional[Answer] = None, http_status: int = 0) -> None:
        super().__init__(message, answer, http_status)
        wait = answer.approval if answer else None
        self.approval_url = wait.url if wait else ""
        self.expires_at = wait.expires_at if wait else ""


class RetrySameIntentError(IdemgateError):
    """Safe to call again with the same intent id and payload (and nothing
    else); raised when retry_same_intent is off or spent."""


class DeadlineError(IdemgateError):
    """Still not settled at the deadline: read it later with
    get(operation_key); never resend under a new intent id."""


_PREFIX = re.compile(r"^[A-Za-z0-9._~:-]{1,40}$")


def new_intent_id(prefix: str = "intent") -> str:
    """Makes an intent id, once per business intent. Store it with the
    intent (the order, the approval, the task) before the first call and
    reuse it on every retry: a new id is a new intent, and may be a second
    effect."""
    if not _PREFIX.match(prefix):
        raise ValueError("intent id prefix: 1-40 of letters, digits and . _ ~ : -")
    return f"{prefix}-{uuid.uuid4()}"


class Client:
    """A client of one idemgate HTTP API."""

    def __init__(
        self,
        base_url: str,
        token: str = "",
        timeout: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not base_url:
            raise ValueError("base_url is required, e.g. http://127.0.0.1:8091")
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self._sleep = sleep
        self._clock = clock

    def call(
        self,
        operation: str,
        intent_id: str,
        payload: Mapping[str, Any],
        *,
        approval: str = "",
        wait: float = 60.0,
        retry_same_intent: int = 0,
        wait_for_approval: bool = False,
        prefer_wait: Optional[int] = None,
    ) -> Answer:
        """Runs one business operation and follows the answer to a final
        outcome: returns the answer when it is done (the effect exists);
        raises a typed error for every other next action. wait bounds the
        polling in seconds; retry_same_intent is how many times to resend
        the same intent on retry_same_intent; wait_for_approval keeps
        polling while a person decides; prefer_wait is how long the daemon
        may hold each request (Prefer: wait; default up to 30 s within
        wait, 0 answers at once and polls)."""
        return self._follow("/v1/operations/" + urllib.parse.quote(operation, safe=""), intent_id, payload,
                            approval, wait, retry_same_intent, wait_for_approval, prefer_wait)

    def process(
        self,
        name: str,
        intent_id: str,
        payload: Mapping[str, Any],
        *,
        approval: str = "",
        wait: float = 60.0,
        retry_same_intent: int = 0,
        wait_for_approval: bool = False,
        prefer_wait: Optional[int] = None,
    ) -> Answer:
        """Runs a declared process (e.g. "order.checkout") as call does an
        operation."""
        return self._follow("/v1/processes/" + urllib.parse.quote(name, safe=""), intent_id, payload,
                            approval, wait, retry_same_intent, wait_for_approval, prefer_wait)

    def get(self, operation_key: str) -> Answer:
        """Reads an operation's (or a process's) answer by its key; never
        executes anything."""
        answer, _ = self._request("GET", self._read_path(operation_key), None, {})
        return answer

    @staticmethod
    def _read_path(key: str) -> str:
        parts = key.split(":")
        base = "/v1/processes/" if len(parts) > 1 and parts[1].startswith("process.") else "/v1/operations/"
        return base + urllib.parse.quote(key, safe=":")

    def _follow(
        self,
        path: str,
        intent_id: str,
        payload: Mapping[str, Any],
        approval: str,
        wait: float,
        retry_same_intent: int,
        wait_for_approval: bool,
        prefer_wait: Optional[int],
    ) -> Answer:
        if not intent_id:
            raise ValueError("intent_id is required: make it once per business intent (new_intent_id) and reuse it on every retry")
        deadline = self._clock() + wait
        headers = {"Idempotency-Key": json.dumps(intent_id), "Content-Type": "application/json"}
        if approval:
            headers["Idempotency-Approval"] = approval
        body = json.dumps(dict(payload)).encode()

        def submit() -> tuple[Answer, str]:
            left = max(0, min(30 if prefer_wait is None else prefer_wait, int(deadline - self._clock())))
            return self._request("POST", path, body, {**headers, "Prefer": f"wait={left}"})

        answer, location = submit()
        retries = 0
        while True:
            pause = max(answer.retry_after_ms, 50) / 1000
            action = answer.next_action
            if action == NextAction.DONE:
                return answer
            if action in (NextAction.POLL, NextAction.AWAIT_APPROVAL):
                if action == NextAction.AWAIT_APPROVAL and not wait_for_approval:
                    raise AwaitApprovalError(answer.reason, answer)
                if self._clock() + pause > deadline:
                    kind = AwaitApprovalError if action == NextAction.AWAIT_APPROVAL else DeadlineError
                    raise kind(f"not settled within {wait}s: {answer.reason}", answer)
                self._sleep(pause)
                answer, _ = self._request("GET", location or self._read_path(answer.operation_key), None, {})
            elif action == NextAction.RETRY_SAME_INTENT:
                if retries >= retry_same_intent or self._clock() + pause > deadline:
                    raise RetrySameIntentError(answer.reason, answer)
                retries += 1
                self._sleep(pause)
                answer, location = submit()  # the same intent id and payload: never a second effect
            elif action == NextAction.FIX_INPUT:
                raise FixInputError(answer.reason, answer)
            elif action == NextAction.NEW_INTENT_REQUIRED:
                raise NewIntentRequiredError(answer.reason, answer)
            elif action == NextAction.HUMAN_REVIEW:
                raise HumanReviewError(answer.reason, answer)
            else:
                raise IdemgateError(f"unknown next_action {action!r}: {answer.reason}", answer)

    def _request(self, method: str, path: str, body: Optional[bytes], headers: Mapping[str, str]) -> tuple[Answer, str]:
        h = {"Accept": "application/json, application/problem+json", **headers}
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        req = urllib.request.Request(self.base_url + path, data=body, headers=h, method=method)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                status, ctype, raw, location = resp.status, resp.headers.get("Content-Type", ""), resp.read(), resp.headers.get("Location", "")
        except urllib.error.HTTPError as err:
            status, ctype, raw, location = err.code, err.headers.get("Content-Type", ""), err.read(), err.headers.get("Location", "")
        try:
            doc = json.loads(raw) if raw else {}
        except ValueError as err:
            raise IdemgateError(f"{method} {path}: HTTP {status}, not JSON", http_status=status) from err
        problem = ctype.startswith("application/problem+json")
        answer_doc = doc.get("answer") if problem else doc
        if not isinstance(answer_doc, dict) or not isinstance(answer_doc.get("next_action"), str):
            # A problem without an answer: authentication, a malformed request.
            kind = FixInputError if status in (400, 413, 415) else IdemgateError
            raise kind(f"{method} {path}: HTTP {status}: {doc.get('detail') or doc.get('title') or raw!r}", http_status=status)
        return Answer.from_json(answer_doc), location or ""
