"""Identifier generation: a prefix and random hex digits ("ro-" + 12, "at-" + 8, "rs-" + 12).

The digits come from a private generator seeded from `os.urandom` (and seeded again in a forked child), not from
`os.urandom` per id: that system call releases the GIL, and ids are made inside store transactions, where giving
up the GIL lets every other thread of the process queue up behind the transaction lock. A private instance is
unaffected by `random.seed(...)` in user code, so runs that seed for reproducibility still get fresh ids.
"""

from __future__ import annotations

import os
import random

_random = random.Random(os.urandom(32))


def _reseed() -> None:
    _random.seed(os.urandom(32))


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reseed)


def generate_id(prefix: str, hex_digits: int) -> str:
    return prefix + format(_random.getrandbits(hex_digits * 4), f"0{hex_digits}x")


def generate_rollout_id() -> str:
    return generate_id("ro-", 12)


def generate_attempt_id() -> str:
    return generate_id("at-", 8)


def generate_resources_id() -> str:
    return generate_id("rs-", 12)
