// Types of the idemgate client. The Answer interface is the HTTP API's
// answer schema (GET /v1/openapi.json, components.schemas.Answer); a Go test
// (clients_test.go) keeps the member names equal.

export type NextActionName =
  | "done"
  | "poll"
  | "await_approval"
  | "retry_same_intent"
  | "fix_input"
  | "new_intent_required"
  | "human_review";

export declare const NextAction: Readonly<{
  DONE: "done";
  POLL: "poll";
  AWAIT_APPROVAL: "await_approval";
  RETRY_SAME_INTENT: "retry_same_intent";
  FIX_INPUT: "fix_input";
  NEW_INTENT_REQUIRED: "new_intent_required";
  HUMAN_REVIEW: "human_review";
}>;

export interface ApprovalWait {
  url?: string;
  expires_at: string;
  approvers?: number;
  approved?: number;
}

export interface Existing {
  status: "succeeded" | "failed_final" | "pending";
  target_object_id?: string;
  error_code?: string;
}

export interface TrailStep {
  attempt?: number;
  kind?: string;
  outcome?: string;
  error_code?: string;
  note?: string;
  started_at?: string;
  finished_at?: string;
}

export interface Answer {
  status: "succeeded" | "failed_final" | "conflict" | "rejected" | "pending" | "unavailable" | "not_found";
  operation_key: string;
  operation?: string;
  replayed: boolean;
  target_system?: string;
  target_object_id: string;
  error_code: string;
  reason: string;
  retry_after_ms: number;
  next_action: NextActionName;
  conflict_fields?: string[];
  existing?: Existing;
  approval?: ApprovalWait;
  attempts?: number;
  result?: Record<string, unknown>;
  journal_status?: string;
  trail?: TrailStep[];
}

export interface CallOptions {
  /** A pre-signed approval token (JWS) or your approval reference, sent as Idempotency-Approval. */
  approval?: string;
  /** How long to follow poll answers before DeadlineError. Default 60000. */
  waitMs?: number;
  /** How many times to resend the same intent on retry_same_intent. Default 0: raise. */
  retrySameIntent?: number;
  /** Keep polling while the intent waits for a person (until waitMs). Default false: raise AwaitApprovalError. */
  waitForApproval?: boolean;
  /** How long the daemon may hold each request (Prefer: wait), in seconds. Default: up to 30, within waitMs; 0 answers at once and polls. */
  preferWaitS?: number;
  signal?: AbortSignal;
}

export declare class IdemgateError extends Error {
  readonly answer: Answer | null;
  readonly httpStatus: number;
  readonly operationKey: string;
}
export declare class FixInputError extends IdemgateError {}
export declare class NewIntentRequiredError extends IdemgateError {}
export declare class HumanReviewError extends IdemgateError {}
export declare class AwaitApprovalError extends IdemgateError {
  readonly approvalUrl: string;
  readonly expiresAt: string;
}
export declare class RetrySameIntentError extends IdemgateError {}
export declare class DeadlineError extends IdemgateError {}

export declare function newIntentId(prefix?: string): string;

export declare class Client {
  constructor(opts: { baseUrl: string; token?: string; fetch?: typeof fetch; timeoutMs?: number });
  call(operation: string, intentId: string, payload: Record<string, unknown>, opts?: CallOptions): Promise<Answer>;
  process(name: string, intentId: string, input: Record<string, unknown>, opts?: CallOptions): Promise<Answer>;
  get(operationKey: string, opts?: { signal?: AbortSignal }): Promise<Answer>;
}
