"""A fault for tests with real server processes: the server kills itself at a chosen moment.

`AGL_STORE_TEST_KILL_AFTER_COMMIT=<operation>` (for example `enqueue_many_rollouts`) makes an `agl store` process send
itself SIGKILL right after a keyed write of that operation committed and before anything else happens (the answer is
neither sent nor, where it is recorded apart from the write, recorded). Unset, it costs one comparison per write.
"""

from __future__ import annotations

import os
import signal

__all__ = ["KILL_AFTER_COMMIT_ENV", "kill_after_commit_if_asked"]

KILL_AFTER_COMMIT_ENV = "AGL_STORE_TEST_KILL_AFTER_COMMIT"
_KILL_AFTER = os.environ.get(KILL_AFTER_COMMIT_ENV) or None


def kill_after_commit_if_asked(operation: str) -> None:
    """SIGKILL this process when `operation` is the one named by `AGL_STORE_TEST_KILL_AFTER_COMMIT`."""
    if _KILL_AFTER is not None and operation == _KILL_AFTER:
        os.kill(os.getpid(), signal.SIGKILL)
