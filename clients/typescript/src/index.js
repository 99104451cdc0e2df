// idemgate client for Node.js (18+) and browsers: the HTTP API, with the
// answer's next_action followed for you. No dependencies beyond fetch.
//
// One business intent = one intent id, made once (newIntentId) and stored
// with the intent, reused unchanged on every retry. A new id is a new
// intent: a possible second charge.

/** The next actions an answer can carry. */
export const NextAction = Object.freeze({
  DONE: "done",
  POLL: "poll",
  AWAIT_APPROVAL: "await_approval",
  RETRY_SAME_INTENT: "retry_same_intent",
  FIX_INPUT: "fix_input",
  NEW_INTENT_REQUIRED: "new_intent_required",
  HUMAN_REVIEW: "human_review",
});

/** Base of every error this client raises; `answer` is idemgate's answer (when there is one). */
export class IdemgateError extends Error {
  constructor(message, { answer = null, httpStatus = 0, cause } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = new.target.name;
    this.answer = answer;
    this.httpStatus = httpStatus;
    this.operationKey = answer?.operation_key ?? "";
  }
}
/** Rejected before anything ran: fix the field named in the reason, call again (the same intent id may be reused). */
export class FixInputError extends IdemgateError {}
/** This intent id cannot do it: another payload under the same id, a cancellation, a denied or expired approval. A changed request is a new intent. */
export class NewIntentRequiredError extends IdemgateError {}
/** A person must look: an outcome the target could not confirm, or a final refusal from the target. */
export class HumanReviewError extends IdemgateError {}
/** The intent waits for a person's approval; nothing ran. `approvalUrl` is where a person decides. */
export class AwaitApprovalError extends IdemgateError {
  constructor(message, opts = {}) {
    super(message, opts);
    this.approvalUrl = opts.answer?.approval?.url ?? "";
    this.expiresAt = opts.answer?.approval?.expires_at ?? "";
  }
}
/** Safe to call again with the same intent id and payload (and nothing else); raised when retrySameIntent is off or spent. */
export class RetrySameIntentError extends IdemgateError {}
/** Still not settled at the deadline: read it later with get(operationKey); never resend under a new intent id. */
export class DeadlineError extends IdemgateError {}

/**
 * Makes an intent id, once per business intent. Store it with the intent
 * (the order, the approval, the task) before the first call and reuse it on
 * every retry: a new id is a new intent, and may be a second effect.
 * @param {string} [prefix] letters, digits, . _ ~ : - only
 */
export function newIntentId(prefix = "intent") {
  if (!/^[A-Za-z0-9._~:-]{1,40}$/.test(prefix)) {
    throw new TypeError("intent id prefix: 1-40 of letters, digits and . _ ~ : -");
  }
  return `${prefix}-${globalThis.crypto.randomUUID()}`;
}

const sleepFor = (ms, signal) =>
  new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => { clearTimeout(t); reject(signal.reason); }, { once: true });
  });

export class Client {
  /**
   * @param {{baseUrl: string, token?: string, fetch?: typeof fetch, timeoutMs?: number}} opts
   */
  constructor({ baseUrl, token = "", fetch: f = globalThis.fetch, timeoutMs = 30_000 }) {
    if (!baseUrl) throw new TypeError("baseUrl is required, e.g. http://127.0.0.1:8091");
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.token = token;
    this.fetch = f;
    this.timeoutMs = timeoutMs;
  }

  /**
   * Runs one business operation and follows the answer to a final outcome.
   * Returns the answer when it is done (the effect exists); raises a typed
   * error for every other next action.
   * @param {string} operation e.g. "payment.charge"
   * @param {string} intentId the intent's id (newIntentId), the same on every retry
   * @param {object} payload the operation's fields (money as integer minor units)
   * @param {import("./index").CallOptions} [opts]
   */
  async call(operation, intentId, payload, opts = {}) {
    return this.#follow(`/v1/operations/${encodeURIComponent(operation)}`, intentId, payload, opts);
  }

  /** Runs a declared process (e.g. "order.checkout") as call does an operation. */
  async process(name, intentId, input, opts = {}) {
    return this.#follow(`/v1/processes/${encodeURIComponent(name)}`, intentId, input, opts);
  }

  /** Reads an operation's answer by its key (never executes anything). */
  async get(operationKey, { signal } = {}) {
    const path = operationKey.startsWith("process.") || /^[^:]+:process\./.test(operationKey) ? "/v1/processes/" : "/v1/operations/";
    const { answer } = await this.#request("GET", path + encodeURIComponent(operationKey), null, {}, signal);
    return answer;
  }

  async #follow(path, intentId, payload, opts) {
    if (typeof intentId !== "string" || intentId === "") {
      throw new TypeError("intentId is required: make it once per business intent (newIntentId) and reuse it on every retry");
    }
    const { approval = "", waitMs = 60_000, retrySameIntent = 0, waitForApproval = false, preferWaitS, signal } = opts;
    const deadline = Date.now() + waitMs;
    const headers = { "Idempotency-Key": JSON.stringify(intentId), "Content-Type": "application/json" };
    if (approval) headers["Idempotency-Approval"] = approval;
    const body = JSON.stringify(payload ?? {});
    let retries = 0;
    const submit = () => {
      const left = Math.max(0, Math.min(preferWaitS ?? 30, Math.floor((deadline - Date.now()) / 1000)));
      return this.#request("POST", path, body, { ...headers, Prefer: `wait=${left}` }, signal);
    };
    let { answer, location } = await submit();
    for (;;) {
      const wait = Math.max(answer.retry_after_ms || 0, 50);
      switch (answer.next_action) {
        case NextAction.DONE:
          return answer;
        case NextAction.POLL:
        case NextAction.AWAIT_APPROVAL: {
          if (answer.next_action === NextAction.AWAIT_APPROVAL && !waitForApproval) {
            throw new AwaitApprovalError(answer.reason, { answer });
          }
          if (Date.now() + wait > deadline) {
            const E = answer.next_action === NextAction.AWAIT_APPROVAL ? AwaitApprovalError : DeadlineError;
            throw new E(`not settled within ${waitMs} ms: ${answer.reason}`, { answer });
          }
          await sleepFor(wait, signal);
          const key = answer.operation_key;
          ({ answer } = await this.#request("GET", location || `${path.startsWith("/v1/processes/") ? "/v1/processes/" : "/v1/operations/"}${encodeURIComponent(key)}`, null, {}, signal));
          break;
        }
        case NextAction.RETRY_SAME_INTENT:
          if (retries >= retrySameIntent || Date.now() + wait > deadline) {
            throw new RetrySameIntentError(answer.reason, { answer });
          }
          retries++;
          await sleepFor(wait, signal);
          ({ answer, location } = await submit()); // the same intent id and payload: never a second effect
          break;
        case NextAction.FIX_INPUT:
          throw new FixInputError(answer.reason, { answer });
        case NextAction.NEW_INTENT_REQUIRED:
          throw new NewIntentRequiredError(answer.reason, { answer });
        case NextAction.HUMAN_REVIEW:
          throw new HumanReviewError(answer.reason, { answer });
        default:
          throw new IdemgateError(`unknown next_action ${JSON.stringify(answer.next_action)}: ${answer.reason}`, { answer });
      }
    }
  }

  async #request(method, path, body, headers, signal) {
    const h = { Accept: "application/json, application/problem+json", ...headers };
    if (this.token) h.Authorization = `Bearer ${this.token}`;
    const timeout = AbortSignal.timeout(this.timeoutMs);
    const res = await this.fetch(this.baseUrl + path, {
      method, headers: h, body, signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
    });
    const text = await res.text();
    let doc;
    try {
      doc = text ? JSON.parse(text) : {};
    } catch (cause) {
      throw new IdemgateError(`${method} ${path}: HTTP ${res.status}, not JSON`, { httpStatus: res.status, cause });
    }
    const problem = (res.headers.get("content-type") || "").startsWith("application/problem+json");
    const answer = problem ? doc.answer : doc;
    if (!answer || typeof answer.next_action !== "string") {
      // A problem without an answer: authentication, a malformed request.
      const E = res.status === 400 || res.status === 413 || res.status === 415 ? FixInputError : IdemgateError;
      throw new E(`${method} ${path}: HTTP ${res.status}: ${doc.detail || doc.title || text}`, { httpStatus: res.status });
    }
    return { answer, location: res.headers.get("location") || "" };
  }
}
