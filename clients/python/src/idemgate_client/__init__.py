"""idemgate client for Python: the HTTP API, with the answer's next_action
followed for you. Standard library only.

One business intent = one intent id, made once (new_intent_id) and stored
with the intent, reused unchanged on every retry. A new id is a new intent:
a possible second charge.
"""

from .client import (
    Answer,
    ApprovalWait,
    AwaitApprovalError,
    Client,
    DeadlineError,
    FixInputError,
    HumanReviewError,
    IdemgateError,
    NewIntentRequiredError,
    NextAction,
    RetrySameIntentError,
    new_intent_id,
)

__all__ = [
    "Answer",
    "ApprovalWait",
    "AwaitApprovalError",
    "Client",
    "DeadlineError",
    "FixInputError",
    "HumanReviewError",
    "IdemgateError",
    "NewIntentRequiredError",
    "NextAction",
    "RetrySameIntentError",
    "new_intent_id",
]
