"""When the store client retries: connection failures and 502/503/504, with capped exponential backoff and jitter.

Client errors (4xx) are never retried: the same request would fail the same way. Writes carry an Idempotency-Key,
so repeating one whose response was lost cannot apply it twice. The policy classes live in
`agentlightning.utils.retry` (shared with every other retrying caller) and are re-exported here, their 0.3 path.
"""

from __future__ import annotations

from agentlightning.utils.retry import FixedDelays, RetryPolicy

__all__ = ["RETRYABLE_STATUSES", "FixedDelays", "RetryPolicy"]

RETRYABLE_STATUSES = frozenset({502, 503, 504})
