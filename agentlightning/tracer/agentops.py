"""`AgentOpsTracer`: `OtelTracer` plus the AgentOps SDK, working fully offline (optional extra `agentops`).

The AgentOps SDK is initialised so that code written against it (`@agentops.agent`, `@agentops.operation`,
`@agentops.task`, its LangChain callback handler) produces spans, but it never contacts AgentOps' servers:
- its telemetry set-up is replaced: AgentOps uses Agent Lightning's tracer provider and gets no span, metric or log
  exporter (nothing is uploaded);
- its authentication request is skipped (no API key is sent anywhere);
- its own LLM instrumentation is turned off; LLM calls are captured by Agent Lightning's instrumentation
  (`instrument_all`) when `instrument_managed` is True.
AgentOps spans therefore reach the store like any other span of the trace context.
"""

from __future__ import annotations

import logging
import os
import warnings
from typing import Any, Optional

from agentlightning.utils import extensions

from .otel import OtelTracer
from .provider import get_sdk_provider

__all__ = ["AgentOpsTracer"]

logger = logging.getLogger(__name__)

_INSTALL_HINT = "AgentOpsTracer needs the agentops package: pip install 'agentlightning[agentops]'"


def _import_agentops() -> Any:
    try:
        import agentops
    except ImportError as exc:
        raise ImportError(_INSTALL_HINT) from exc
    return agentops


def _offline_telemetry(*args: Any, **kwargs: Any) -> tuple[Any, Any]:
    """Replacement of AgentOps' telemetry set-up: our provider, a meter provider without exporters."""
    from opentelemetry.sdk.metrics import MeterProvider

    return get_sdk_provider(), MeterProvider()


def init_agentops_offline() -> None:
    """Initialise the AgentOps client once per process without any network access."""
    agentops = _import_agentops()
    client = agentops.get_client()
    if client.initialized:
        return
    from agentops.client.client import Client
    from agentops.sdk import core as agentops_core

    os.environ.setdefault("AGENTOPS_LOGGING_TO_FILE", "false")  # AgentOps would write ./agentops.log

    original_setup = agentops_core.setup_telemetry
    original_auth = Client._start_auth_task  # pyright: ignore[reportPrivateUsage]
    agentops_core.setup_telemetry = _offline_telemetry
    Client._start_auth_task = lambda self, api_key: None  # type: ignore[method-assign]
    try:
        agentops.init(api_key=None, auto_start_session=False, instrument_llm_calls=False, log_level=logging.WARNING)
    finally:
        agentops_core.setup_telemetry = original_setup
        Client._start_auth_task = original_auth  # type: ignore[method-assign]
    if not agentops.get_client().initialized:  # pragma: no cover - depends on AgentOps internals
        logger.error("The AgentOps client did not initialise; AgentOps decorators will not record spans")


class AgentOpsTracer(OtelTracer):
    """An OtelTracer that also initialises the AgentOps SDK offline.

    Args:
        agentops_managed: initialise the AgentOps client in `init_worker` (False: the application does it).
        instrument_managed: turn on Agent Lightning's zero-code instrumentation for the worker's lifetime.
        daemon: accepted for v0.2 compatibility (no AgentOps server process is started any more).
    """

    def __init__(
        self,
        *,
        agentops_managed: bool = True,
        instrument_managed: bool = True,
        daemon: bool = True,
        **otel_options: Any,
    ) -> None:
        super().__init__(instrument=instrument_managed, **otel_options)
        if not agentops_managed:
            logger.warning("agentops_managed=False: the AgentOps client must be initialised by the application")
        if not instrument_managed:
            logger.warning("instrument_managed=False: LLM calls are only captured if the application instruments them")
        self.agentops_managed = agentops_managed
        self.instrument_managed = instrument_managed
        self.daemon = daemon

    def init_worker(self, worker_id: int, store: Optional[Any] = None) -> None:  # type: ignore[override]
        if self.agentops_managed:
            init_agentops_offline()
        super().init_worker(worker_id, store)

    def instrument(self, worker_id: int) -> None:
        """v0.2 hook: turn on zero-code instrumentation."""
        extensions.load(extensions.TRACER_INSTRUMENTATION).instrument_all()

    def uninstrument(self, worker_id: int) -> None:
        """v0.2 hook: turn off zero-code instrumentation."""
        extensions.load(extensions.TRACER_INSTRUMENTATION).uninstrument_all()

    def get_langchain_handler(self, tags: Optional[list[str]] = None) -> Any:
        """AgentOps' LangChain callback handler (records chain and LLM runs as AgentOps spans)."""
        agentops = _import_agentops()
        if not agentops.get_client().initialized:
            warnings.warn("The AgentOps client is not initialised; call init_worker first", stacklevel=2)
        from agentops.integration.callbacks.langchain import LangchainCallbackHandler

        return LangchainCallbackHandler(api_key=None, tags=tags or [])

    get_langchain_callback_handler = get_langchain_handler
