"""Whether an OpenAI-compatible server supports vLLM's `return_token_ids`, decided from its error's structure.

Asking for token ids is what makes a call trainable, so the field is sent by default (by the LLM proxy, and by the
tracer's zero-code capture). A server that does not know the field rejects the request; the request is then sent
again without it and token-id capture is switched off for that server for a while, loudly. The decision is made on
the *structure* of the error, never on the mere presence of the text `return_token_ids`: servers echo bad values
back (`"seed": "return_token_ids"` gives a 400 whose body contains the text), and such an error is passed to the
caller with capture left on.

Rejections recognised:
- OpenAI: `Unrecognized request argument(s) supplied: a, return_token_ids`, or `param == "return_token_ids"`;
- FastAPI / pydantic servers: a `detail` item whose `loc` ends with `return_token_ids` and whose `type` says the
  field is not allowed (`extra_forbidden`, `value_error.extra`);
- the same pydantic error printed into a message (vLLM and others put `str(errors)` in the message text).

`TokenIdSupport` remembers rejections per server and asks again after `reprobe_after` seconds (doubling while the
server keeps refusing, up to `max_reprobe_after`).
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Union

__all__ = ["FIELD", "TokenIdSupport", "rejects_return_token_ids"]

logger = logging.getLogger(__name__)

FIELD = "return_token_ids"

_EXTRA_FIELD_TYPES = frozenset({"extra_forbidden", "value_error.extra", "extra_fields_not_permitted"})
_UNRECOGNIZED = re.compile(r"unrecognized request arguments? supplied:\s*([^.\n]+)", re.IGNORECASE)
_DICT_TEXT = re.compile(r"\{[^{}]*\}")
_TYPE_IN_TEXT = re.compile(r"""["']type["']\s*:\s*["']([\w.]+)["']""")
_LOC_IN_TEXT = re.compile(r"""["']loc["']\s*:\s*[\(\[]([^\)\]]*)[\)\]]""")
_REJECTION_STATUSES = frozenset({400, 422})


def _names_in(arguments: str) -> list[str]:
    return [name.strip().strip("'\"` ") for name in arguments.split(",")]


def _text_rejects(text: str) -> bool:
    match = _UNRECOGNIZED.search(text)
    if match is not None and FIELD in _names_in(match.group(1)):
        return True
    for segment in _DICT_TEXT.findall(text):
        kind = _TYPE_IN_TEXT.search(segment)
        loc = _LOC_IN_TEXT.search(segment)
        if kind is None or loc is None or kind.group(1) not in _EXTRA_FIELD_TYPES:
            continue
        parts = _names_in(loc.group(1))
        if parts and parts[-1] == FIELD:
            return True
    return False


def _item_rejects(item: Any) -> bool:
    """A pydantic/FastAPI validation error item rejecting the field as unknown."""
    if not isinstance(item, Mapping):
        return False
    loc = item.get("loc")
    kind = item.get("type")
    return (
        isinstance(loc, (list, tuple))
        and bool(loc)
        and loc[-1] == FIELD
        and isinstance(kind, str)
        and kind in _EXTRA_FIELD_TYPES
    )


def _payload_rejects(payload: Any) -> bool:
    if isinstance(payload, list):
        return any(_item_rejects(item) or _payload_rejects(item) for item in payload)
    if not isinstance(payload, Mapping):
        return isinstance(payload, str) and _text_rejects(payload)
    if payload.get("param") == FIELD or _item_rejects(payload):
        return True
    for key in ("error", "detail", "errors"):
        if key in payload and _payload_rejects(payload[key]):
            return True
    message = payload.get("message")
    return isinstance(message, str) and _text_rejects(message)


def rejects_return_token_ids(status: int, body: Union[bytes, str, Mapping[str, Any], None]) -> bool:
    """True when an error answer (`status`, `body`) says the server does not know the `return_token_ids` field.

    Only the structure counts (see the module docstring): an error that merely quotes the text is not a rejection.
    """
    if status not in _REJECTION_STATUSES or body is None:
        return False
    payload: Any = body
    if isinstance(body, (bytes, str)):
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        try:
            payload = json.loads(text)
        except ValueError:
            return _text_rejects(text)
    return _payload_rejects(payload)


@dataclass
class _Refusal:
    until: float
    interval: float


class TokenIdSupport:
    """Per-server memory of `return_token_ids` rejections, with re-probing.

    Args:
        reprobe_after: seconds before a server that refused the field is asked again.
        max_reprobe_after: cap of the interval, which doubles while the server keeps refusing.
        clock: monotonic time source (injectable for tests).
        what: who is asking, for the log messages ("LLM proxy", "tracer").
    """

    def __init__(
        self,
        *,
        reprobe_after: float = 300.0,
        max_reprobe_after: float = 3600.0,
        clock: Callable[[], float] = time.monotonic,
        what: str = "LLM proxy",
    ) -> None:
        if reprobe_after <= 0 or max_reprobe_after < reprobe_after:
            raise ValueError("reprobe_after must be positive and at most max_reprobe_after")
        self.reprobe_after = reprobe_after
        self.max_reprobe_after = max_reprobe_after
        self._clock = clock
        self._what = what
        self._lock = threading.Lock()
        self._refusals: dict[str, _Refusal] = {}
        self._probing: set[str] = set()

    def wanted(self, server: str) -> bool:
        """Whether to ask `server` for token ids now (True again once its re-probe time has come)."""
        with self._lock:
            refusal = self._refusals.get(server)
            if refusal is None:
                return True
            if self._clock() < refusal.until:
                return False
            if server not in self._probing:
                self._probing.add(server)
                logger.info("%s: asking %s for token ids again (re-probe)", self._what, server)
            return True

    def rejected(self, server: str, detail: str = "") -> None:
        """`server` refused the field: stop asking it until the re-probe time, and say so loudly."""
        with self._lock:
            previous = self._refusals.get(server)
            interval = self.reprobe_after if previous is None else min(previous.interval * 2, self.max_reprobe_after)
            self._refusals[server] = _Refusal(until=self._clock() + interval, interval=interval)
            self._probing.discard(server)
        logger.warning(
            "%s: TOKEN-ID CAPTURE IS OFF for %s: it rejected `return_token_ids`%s. Calls are sent without it and "
            "their spans carry no token ids, so they cannot be trained on. Asking again in %.0f s.",
            self._what,
            server,
            f" ({detail[:300]})" if detail else "",
            interval,
        )

    def accepted(self, server: str) -> None:
        """`server` answered a request that asked for token ids: forget any earlier refusal."""
        with self._lock:
            if server not in self._refusals:
                return
            del self._refusals[server]
            self._probing.discard(server)
        logger.warning("%s: %s accepts `return_token_ids` again; token-id capture is back on", self._what, server)

    def refused(self) -> dict[str, float]:
        """Servers currently not asked, with the seconds left until their re-probe."""
        now = self._clock()
        with self._lock:
            return {server: max(0.0, r.until - now) for server, r in self._refusals.items() if r.until > now}
