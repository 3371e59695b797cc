"""Identifier generation: a prefix and random hex digits ("ro-" + 12, "at-" + 8, "rs-" + 12)."""

from __future__ import annotations

import os


def generate_id(prefix: str, hex_digits: int) -> str:
    return prefix + os.urandom((hex_digits + 1) // 2).hex()[:hex_digits]


def generate_rollout_id() -> str:
    return generate_id("ro-", 12)


def generate_attempt_id() -> str:
    return generate_id("at-", 8)


def generate_resources_id() -> str:
    return generate_id("rs-", 12)
