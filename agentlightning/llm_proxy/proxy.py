"""`LLMProxy`: an OpenAI-compatible gateway that ties every LLM call to its rollout and records it in the store.

Agents call `<proxy>/rollout/<rollout_id>/attempt/<attempt_id>/v1/chat/completions` (the URL `ProxyLLM.get_base_url`
builds). The proxy forwards to the upstream serving the requested model, asks vLLM-style upstreams for token ids,
relays the answer (streaming chunk by chunk) and records one span per call under the right rollout, attempt and
sequence id. `start`, `stop` and `restart` work both as plain calls (0.2 style) and awaited (0.3 style).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Generator
from typing import TYPE_CHECKING, Any, Optional

from agentlightning.store.base import LightningStore
from agentlightning.types import LLM, ProxyLLM

from .auth import API_KEY_ENV, check_exposure
from .models import ModelConfig, ModelRouter
from .token_id_support import TokenIdSupport

if TYPE_CHECKING:
    from agentlightning.tracer.batch import SpanWriterStats

logger = logging.getLogger(__name__)

_SUPPORTED_MIDDLEWARES = {"rollout_attempt", "stream_conversion", "message_inspection"}
_SUPPORTED_CALLBACKS = {"return_token_ids", "opentelemetry", "logprobs"}

_active_proxy: Optional[LLMProxy] = None


def get_active_llm_proxy() -> LLMProxy:
    """The proxy started most recently in this process (ValueError when none is running)."""
    if _active_proxy is None:
        raise ValueError("No active LLM proxy: create an LLMProxy and start() it first")
    return _active_proxy


def set_active_llm_proxy(proxy: Optional[LLMProxy]) -> None:
    global _active_proxy
    if proxy is not None and _active_proxy is not None and _active_proxy is not proxy:
        logger.warning("Replacing the active LLM proxy")
    _active_proxy = proxy


class _Done:
    """The result of `start()`/`stop()`: already done, and awaitable so 0.3 code can `await` it."""

    def __await__(self) -> Generator[Any, None, None]:
        return
        yield


class LLMProxy:
    """Serve an OpenAI-compatible proxy in front of `model_list`, recording calls into `store`.

    Args:
        port: port to listen on (None or 0 picks a free one).
        model_list: LiteLLM-style entries `{"model_name": ..., "litellm_params": {"model": "hosted_vllm/<name>",
            "api_base": "http://host:port/v1", "api_key": ...}}`; several entries with one name are used in turn.
        store: where spans go (any LightningStore).
        host: the host name advertised in endpoints (default: the bind host).
        num_retries: upstream retries on connection errors, 429 and 5xx (with backoff).
        bind_host: the interface to listen on (default 127.0.0.1).
        request_timeout: seconds to wait for an upstream answer.
        api_key: the key agents must send (`Authorization: Bearer <key>`; default: `AGL_PROXY_API_KEY`). Required
            on a non-loopback `bind_host` unless `insecure=True`; `as_resource` hands it to agents.
        insecure: allow a non-loopback `bind_host` without an API key (the proxy then relays anyone's calls).
        token_id_reprobe_after: seconds before an upstream that refused `return_token_ids` is asked again.
        writer_options: settings of the span writer (`agentlightning.tracer.writer.SpanWriter`: `max_buffered_spans`,
            `spill_dir`, `max_spill_bytes`, `max_retries`, ...); `writer_stats()` reads its counters.
    """

    def __init__(
        self,
        port: Optional[int] = None,
        model_list: Optional[list[ModelConfig]] = None,
        store: Optional[LightningStore] = None,
        host: Optional[str] = None,
        litellm_config: Optional[dict[str, Any]] = None,
        num_retries: int = 3,
        num_workers: int = 1,
        launch_mode: str = "thread",
        launcher_args: Any = None,
        middlewares: Optional[list[str]] = None,
        callbacks: Optional[list[str]] = None,
        *,
        bind_host: str = "127.0.0.1",
        request_timeout: float = 600.0,
        api_key: Optional[str] = None,
        insecure: bool = False,
        token_id_reprobe_after: float = 300.0,
        writer_options: Optional[dict[str, Any]] = None,
    ) -> None:
        if num_workers != 1:
            raise ValueError("LLMProxy serves with one worker; run several proxies behind a load balancer to scale out")
        if launch_mode not in ("thread", "asyncio"):
            raise ValueError(f"launch_mode {launch_mode!r} is not supported; the proxy runs in a background thread")
        if launcher_args is not None:
            raise ValueError("launcher_args is not supported; pass port, host and bind_host instead")
        unknown = set(middlewares or []) - _SUPPORTED_MIDDLEWARES
        if unknown:
            raise ValueError(f"Unknown proxy middlewares {sorted(unknown)}; known: {sorted(_SUPPORTED_MIDDLEWARES)}")
        unknown = set(callbacks or []) - _SUPPORTED_CALLBACKS
        if unknown:
            raise ValueError(f"Unknown proxy callbacks {sorted(unknown)}; known: {sorted(_SUPPORTED_CALLBACKS)}")
        settings = (litellm_config or {}).get("litellm_settings") or {}
        if isinstance(settings.get("num_retries"), int):
            num_retries = settings["num_retries"]
        if num_retries < 0:
            raise ValueError(f"num_retries must not be negative, got {num_retries}")
        self.api_key = api_key if api_key is not None else (os.environ.get(API_KEY_ENV) or None)
        self.insecure = insecure
        check_exposure(bind_host, self.api_key, insecure)
        self.port = port or 0
        self.model_list: list[ModelConfig] = list(model_list or [])
        self.store = store
        self.bind_host = bind_host
        self.host = host or bind_host
        self.num_retries = num_retries
        self.request_timeout = request_timeout
        self.request_logprobs = "logprobs" in (callbacks or [])
        self.return_token_ids = callbacks is None or "return_token_ids" in callbacks
        self._token_ids = TokenIdSupport(reprobe_after=token_id_reprobe_after)
        self._router = self._make_router(self.model_list)
        self.writer_options = dict(writer_options or {})
        self._server: Any = None
        self._state: Any = None

    # --------------------------------------------------------------------------------------------- configuration
    def get_store(self) -> Optional[LightningStore]:
        return self.store

    def set_store(self, store: LightningStore) -> None:
        self.store = store
        if self.is_running():
            self.restart()

    def update_port(self, port: int) -> None:
        self.port = port

    def _make_router(self, model_list: list[ModelConfig]) -> ModelRouter:
        return ModelRouter(list(model_list), request_token_ids=self.return_token_ids, token_ids=self._token_ids)

    def update_model_list(self, model_list: list[ModelConfig], *, restart: bool = True) -> None:
        """Replace the model list; a running proxy restarts with it, or with `restart=False` routes new requests by it
        at once (requests already relayed finish on the upstream they were routed to)."""
        self._router = self._make_router(model_list)
        self.model_list = list(model_list)
        if self.is_running():
            if restart or self._state is None:
                self.restart()
            else:
                self._state.router = self._router

    def request_logprobs_on_every_call(self) -> None:
        """Ask upstreams for the sampled tokens' log-probs on every call from now on (as `callbacks=["logprobs"]`),
        without a restart: the spans then record the sampler's log-probs (`logprobs.content`), which training
        compares with its own."""
        self.request_logprobs = True
        if self._state is not None:
            self._state.request_logprobs = True

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    # ------------------------------------------------------------------------------------------------- lifecycle
    def is_running(self) -> bool:
        return self._server is not None and self._server.running

    def start(self) -> _Done:
        """Start serving (restarts if already running). Blocks until the proxy answers; awaitable too."""
        from agentlightning.utils.hosts import guard_loopback
        from agentlightning.utils.uvicorn_thread import UvicornThread

        from .app import ProxyState, create_proxy_app

        if self.store is None:
            raise ValueError("LLMProxy needs a store before it can start: pass store=... or call set_store()")
        check_exposure(self.bind_host, self.api_key, self.insecure)
        if self.is_running():
            self.stop()
        self._state = ProxyState(
            router=self._router,
            store=self.store,
            num_retries=self.num_retries,
            request_timeout=self.request_timeout,
            request_logprobs=self.request_logprobs,
            api_key=self.api_key,
            writer_options=self.writer_options,
        )
        # Keyless on loopback: answer only requests addressed to this machine (or the advertised host), so that a
        # web page cannot use the proxy through DNS rebinding (agentlightning/utils/hosts.py).
        app = guard_loopback(create_proxy_app(self._state), self.bind_host, self.api_key, extra=[self.host])
        self._server = UvicornThread(app, host=self.bind_host, port=self.port, name="agl-llm-proxy")
        self._server.start()
        self.port = self._server.port
        set_active_llm_proxy(self)
        return _Done()

    def stop(self) -> _Done:
        """Stop serving after writing every recorded call to the store."""
        if self._server is None:
            logger.warning("LLMProxy.stop() called but the proxy is not running")
            return _Done()
        self._server.stop()
        self._server = None
        self._state = None
        if _active_proxy is self:
            set_active_llm_proxy(None)
        return _Done()

    def restart(self, *, _port: Optional[int] = None) -> _Done:
        if self.is_running():
            self.stop()
        if _port is not None:
            self.port = _port
        return self.start()

    def flush(self, timeout: float = 30.0) -> None:
        """Block until every call recorded so far is in the store (or given up: see `writer_stats()`)."""
        state = self._state
        if state is None or state.writer is None:
            return
        if not state.writer.flush(timeout):
            raise TimeoutError(f"The LLM proxy could not write its spans within {timeout} s")

    def writer_stats(self) -> Optional[SpanWriterStats]:
        """Counters of the proxy's span writer (written, duplicates, rejected, failed, dropped, pending, ...); None
        while the proxy is not running."""
        state = self._state
        if state is None or state.writer is None:
            return None
        return state.writer.stats()

    async def aflush(self, timeout: float = 30.0) -> None:
        await asyncio.to_thread(self.flush, timeout)

    # -------------------------------------------------------------------------------------------------- resources
    def as_resource(
        self,
        rollout_id: Optional[str] = None,
        attempt_id: Optional[str] = None,
        model: Optional[str] = None,
        sampling_parameters: Optional[dict[str, Any]] = None,
    ) -> LLM:
        """The resource agents use: a ProxyLLM without ids, or an LLM bound to one rollout attempt."""
        names = self._router.model_names
        if model is None:
            if not names:
                raise ValueError("No models found in the proxy's model list")
            if len(names) > 1:
                raise ValueError(f"The proxy serves several models {names}; pass model=...")
            model = names[0]
        if (rollout_id is None) != (attempt_id is None):
            raise ValueError("Pass both rollout_id and attempt_id, or neither")
        parameters = dict(sampling_parameters or {})
        if rollout_id is None:
            return ProxyLLM(endpoint=self.endpoint, model=model, sampling_parameters=parameters, api_key=self.api_key)
        return LLM(
            endpoint=f"{self.endpoint}/rollout/{rollout_id}/attempt/{attempt_id}",
            model=model,
            sampling_parameters=parameters,
            api_key=self.api_key,
        )

    def token_id_refusals(self) -> dict[str, float]:
        """Upstreams that refused `return_token_ids`, with the seconds until they are asked again."""
        return self._token_ids.refused()
