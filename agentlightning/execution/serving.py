"""The store as the strategies hand it out: served over HTTP to runners, and checked before a run starts.

`serve_store` serves any store, as 0.2/0.3 do: a store that does not declare itself async-safe (a user's own
`LightningStore` subclass, typically) is wrapped in `LightningStoreThreaded`, which runs its calls one at a time.
`check_reachable` makes a run against a store server that is not there fail in seconds with one line naming it,
instead of after every retry of every component.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    from agentlightning.store.base import LightningStore
    from agentlightning.store.http.server.server import LightningStoreServer

__all__ = ["check_reachable", "serve_store"]

logger = logging.getLogger(__name__)


def serve_store(store: LightningStore, *, host: str, port: Optional[int], **options: Any) -> LightningStoreServer:
    """A (not yet started) server for `store`; a store that is not async-safe is served through
    `LightningStoreThreaded`."""
    from agentlightning.store.http.server.server import LightningStoreServer

    if not store.capabilities.get("async_safe", False):
        from agentlightning.store.threading import LightningStoreThreaded

        logger.info("%s is not marked async-safe: serving it one call at a time", type(store).__name__)
        store = LightningStoreThreaded(store)
    return LightningStoreServer(store, host=host, port=port, **options)


async def check_reachable(store: LightningStore, *, timeout: float = 15.0) -> None:
    """Make one cheap call to a remote store; raise StoreUnreachableError naming it when it does not answer within
    `timeout` seconds. In-process stores are not checked.

    Raises:
        StoreUnreachableError: the store server could not be reached.
    """
    if not store.is_remote:
        return
    from agentlightning.runner.errors import StoreUnreachableError, describe_store, is_transient_store_error

    where = describe_store(store)
    try:
        await asyncio.wait_for(store.get_latest_resources(), timeout)
    except asyncio.TimeoutError:
        raise StoreUnreachableError(f"The store at {where} did not answer within {timeout:g} s") from None
    except Exception as exc:
        if not is_transient_store_error(exc):
            raise
        raise StoreUnreachableError(f"Cannot reach the store at {where}: {_reason(exc)}") from None


def _reason(exc: BaseException) -> str:
    cause: BaseException = exc
    while cause.__cause__ is not None:  # the socket error under the client's own
        cause = cause.__cause__
    text = " ".join(str(cause).split()) or type(cause).__name__
    return text if len(text) <= 200 else text[:197] + "..."
