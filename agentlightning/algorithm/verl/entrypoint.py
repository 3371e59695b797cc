"""The launch path: start (or join) Ray, run the trainer in a Ray actor, wait for it.

The trainer runs inside a `TaskRunner` Ray actor, so everything it is handed is pickled: the store must be one that
a copy can still reach (the HTTP `LightningStoreServer` the Trainer's client-server strategy hands to algorithms, or
a `LightningStoreClient`), and an LLM proxy is passed as its settings (the actor starts its own proxy, next to the
vLLM servers). Imports verl, ray and torch only when called.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Optional

from .requirements import require_verl

if TYPE_CHECKING:
    from agentlightning.llm_proxy import LLMProxy
    from agentlightning.store.base import LightningStore

__all__ = ["check_store_reachable", "proxy_settings", "run_ppo"]


def check_store_reachable(store: LightningStore) -> None:
    """Raise ValueError unless copies of `store` reach the same data over HTTP (required inside Ray actors)."""
    from agentlightning.algorithm.patience import unwrap_store
    from agentlightning.store.http.client.client import LightningStoreClient
    from agentlightning.store.http.server.server import LightningStoreServer

    if not isinstance(unwrap_store(store), (LightningStoreServer, LightningStoreClient)):
        raise ValueError(
            f"VERL's trainer runs in a Ray actor and needs a store it can reach over HTTP; {type(store).__name__} "
            "would be copied into the actor. Use agl.Trainer (its client-server strategy serves the store), or pass "
            "a LightningStoreServer / LightningStoreClient"
        )


def proxy_settings(proxy: Optional[LLMProxy]) -> Optional[dict[str, Any]]:
    """What the actor needs to rebuild `proxy` (port, hosts, key, retries, timeout), or None."""
    if proxy is None:
        return None
    return {
        "port": proxy.port or None,
        "host": proxy.host,
        "bind_host": proxy.bind_host,
        "api_key": proxy.api_key,
        "insecure": proxy.insecure,
        "num_retries": proxy.num_retries,
        "request_timeout": proxy.request_timeout,
    }


def run_ppo(
    config: Any,
    train_dataset: Any = None,
    val_dataset: Any = None,
    store: Optional[LightningStore] = None,
    llm_proxy: Optional[LLMProxy] = None,
    adapter: Any = None,
    trainer_cls: Optional[type] = None,
    daemon_cls: Optional[type] = None,
    initial_resources: Optional[dict[str, Any]] = None,
) -> None:
    """Initialise Ray (unless already initialised) and run the training in a `TaskRunner` actor until it ends."""
    require_verl()
    if store is None:
        raise ValueError("run_ppo needs a store: the v0.1 server mode is not supported")
    check_store_reachable(store)
    import ray  # type: ignore[import-not-found]
    from omegaconf import OmegaConf  # type: ignore[import-not-found]

    if not ray.is_initialized():
        ray_kwargs = OmegaConf.select(config, "ray_kwargs.ray_init", default=None)
        if ray_kwargs is None:  # VERL before 0.6
            ray_kwargs = OmegaConf.select(config, "ray_init", default={})
        init_kwargs = dict(OmegaConf.to_container(ray_kwargs, resolve=True) or {})  # type: ignore[arg-type]
        env = {
            "TOKENIZERS_PARALLELISM": "true",
            "NCCL_DEBUG": os.environ.get("NCCL_DEBUG", "WARN"),
            "VLLM_LOGGING_LEVEL": os.environ.get("VLLM_LOGGING_LEVEL", "WARN"),
        }
        runtime_env = {k: v for k, v in dict(init_kwargs.pop("runtime_env", None) or {}).items() if v is not None}
        runtime_env["env_vars"] = {**env, **dict(runtime_env.get("env_vars") or {})}
        ray.init(runtime_env=runtime_env, **{k: v for k, v in init_kwargs.items() if v is not None})

    from .runner import TaskRunner

    runner = TaskRunner.remote()  # type: ignore[attr-defined]
    ray.get(
        runner.run.remote(  # type: ignore[attr-defined]
            config,
            train_dataset=None if train_dataset is None else [train_dataset[i] for i in range(len(train_dataset))],
            val_dataset=None if val_dataset is None else [val_dataset[i] for i in range(len(val_dataset))],
            store=store,
            proxy_settings=proxy_settings(llm_proxy),
            adapter=adapter,
            trainer_cls=trainer_cls,
            daemon_cls=daemon_cls,
            initial_resources=initial_resources,
        )
    )
