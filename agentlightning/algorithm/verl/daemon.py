"""The agent side of a VERL step: publish the policy through the LLM proxy, enqueue the batch, collect the rollouts.

The VERL trainer (a synchronous Ray driver) calls, per training or validation batch:

1. `set_up_data_and_server(samples, server_addresses, is_train)`: point the LLM proxy at the vLLM servers that serve
   the current policy, publish it as a `ProxyLLM` resource named `main_llm`, and enqueue every sample `rollout.n`
   times (once for validation), each copy carrying the sample's `data_id` (GRPO's group key);
2. `run_until_all_finished()`: wait until every rollout has finished, reading each one's spans through the adapter
   into triplets;
3. `get_train_batch(...)` (a `VerlBatch`, no verl needed) / `get_train_data_batch(...)` (a `DataProto`), or
   `get_test_metrics()` for validation; then `clear_data_and_server()`.

Runners anywhere (`agl runner`, the Trainer's runner processes, Ray actors) execute the agent against the store; the
daemon never talks to them. It needs neither verl nor a GPU, so it is tested here against a real store.
"""

from __future__ import annotations

import logging
import math
import time
import uuid
from collections.abc import Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Optional, TypeVar

from agentlightning.adapter.rewards import rollout_rewards
from agentlightning.adapter.triplet import TracerTraceToTriplet, TraceToTripletBase
from agentlightning.algorithm.failures import check_failure_reward, read_failed_in_agent
from agentlightning.algorithm.grpo.rollouts.proxy_calls import index_proxy_calls
from agentlightning.types import EnqueueRolloutRequest, Rollout, RolloutConfig, Triplet
from agentlightning.utils.io_loop import io_loop

from .batch import AggregationLevel, RolloutTrace, VerlBatch, build_batch

if TYPE_CHECKING:
    from agentlightning.llm_proxy import LLMProxy
    from agentlightning.store.base import LightningStore

__all__ = ["AgentModeDaemon", "FinishedRollout", "native", "samples_from_columns", "served_model_name"]

logger = logging.getLogger(__name__)

T = TypeVar("T")
RESOURCE_NAME = "main_llm"


def native(value: Any) -> Any:
    """`value` with numpy scalars/arrays (as found in VERL's non-tensor batches) turned into plain Python values."""
    if isinstance(value, Mapping):
        return {str(key): native(item) for key, item in value.items()}  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, (list, tuple)):
        return [native(item) for item in value]  # pyright: ignore[reportUnknownVariableType]
    tolist = getattr(value, "tolist", None)  # numpy arrays and scalars
    if callable(tolist) and not isinstance(value, (str, bytes)):
        return native(tolist())
    return value


def samples_from_columns(batch: Any) -> list[dict[str, Any]]:
    """Samples as dicts, from a list of dicts or from VERL's column layout (`{"field": array of n values}`)."""
    if isinstance(batch, Mapping):
        columns = {str(key): list(values) for key, values in batch.items()}  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
        lengths = {len(values) for values in columns.values()}
        if len(lengths) > 1:
            raise ValueError(f"The batch's columns have different lengths: {sorted(lengths)}")
        size = lengths.pop() if lengths else 0
        return [{name: native(values[index]) for name, values in columns.items()} for index in range(size)]
    samples: list[dict[str, Any]] = []
    for index, sample in enumerate(batch):
        if not isinstance(sample, Mapping):
            raise TypeError(f"Sample {index} of the batch is a {type(sample).__name__}, not a dict of task fields")
        samples.append(native(sample))
    return samples


def served_model_name(address: str, timeout: float = 10.0) -> Optional[str]:
    """The model id an OpenAI-compatible server at `host:port` serves (its first `/v1/models` entry), or None.

    VERL starts vLLM on a local copy of the model, so the name vLLM answers to is not always the configured path.
    """
    import json
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://{address}/v1/models", timeout=timeout) as response:
            models = json.loads(response.read().decode("utf-8")).get("data") or []
    except Exception as exc:
        logger.warning("Could not ask %s which model it serves (%r); using the configured name", address, exc)
        return None
    if models and isinstance(models[0], dict) and models[0].get("id"):
        return str(models[0]["id"])
    return None


class FinishedRollout:
    """A finished rollout with its triplets and outcome (what the batch builder and the metrics read).

    `failed_scored`: the agent raised and `reward` is the daemon's `failure_reward`. A failed rollout that is not
    scored has no triplets (nothing of it is trained). `logprobs`, per triplet: the sampler's log-probs the proxy
    recorded (None: none).
    """

    def __init__(
        self,
        rollout: Rollout,
        sample: dict[str, Any],
        triplets: list[Triplet],
        reward: Optional[float],
        logprobs: Optional[list[Optional[Sequence[float]]]] = None,
        failed_scored: bool = False,
    ):
        self.rollout = rollout
        self.sample = sample
        self.triplets = triplets
        self.reward = reward
        self.logprobs = logprobs  # per triplet: the sampler's log-probs the proxy recorded (None: none)
        self.failed_scored = failed_scored

    def trace(self) -> RolloutTrace:
        return RolloutTrace(
            self.rollout.rollout_id, str(self.sample["data_id"]), self.triplets, self.reward, logprobs=self.logprobs
        )


class AgentModeDaemon:
    """Store-side bridge between a VERL trainer and the agents (see the module docstring).

    Args:
        port: port of the LLM proxy the daemon creates when none is given (None: a free port).
        train_rollout_n: rollouts per training sample (VERL's `actor_rollout_ref.rollout.n`).
        train_information: `{"model": <name agents call>, "temperature": <sampling temperature>}`, optionally
            `"upstream_model"` (the name vLLM serves; asked from the first server's `/v1/models` when absent).
        tokenizer: the policy's tokenizer (only its pad token is read when `pad_token_id` is None).
        mini_batch_size: PPO mini-batch size (the trainer thins batches to a multiple of it).
        pad_token_id: pad id of the batches.
        reward_fillna_value: reward of a rollout that reported none.
        failure_reward: the outcome of a rollout in which the agent's own code raised (see
            `agentlightning.algorithm.failures`); such rollouts are trained on. None (default): every failed rollout
            is left out of the batch (counted as `training/n_rollouts_failed`).
        llm_timeout_seconds: `timeout_seconds` and `unresponsive_seconds` of every rollout.
        mode: "v1" (store mode). The v0.1 HTTP protocol ("v0") is not supported.
        llm_proxy: the proxy to publish (created on demand otherwise; it must use the same store).
        store: the run's store.
        adapter: spans -> triplets (default `TracerTraceToTriplet()`).
        trace_aggregator: `{"level": "transition" | "trajectory", ...}` (see `batch.py`).
        poll_interval: seconds between checks while waiting for rollouts.
        initial_resources: the trainer's initial resources (a prompt template, another model), published next to
            the policy in every version (the policy's `main_llm` replaces one of that name).
    """

    def __init__(
        self,
        port: Optional[int] = None,
        train_rollout_n: int = 1,
        train_information: Optional[Mapping[str, Any]] = None,
        tokenizer: Any = None,
        mini_batch_size: int = 1,
        pad_token_id: Optional[int] = None,
        reward_fillna_value: float = 0.0,
        llm_timeout_seconds: float = 1200.0,
        mode: str = "v1",
        llm_proxy: Optional[LLMProxy] = None,
        store: Optional[LightningStore] = None,
        adapter: Optional[TraceToTripletBase] = None,
        trace_aggregator: Optional[Mapping[str, Any]] = None,
        poll_interval: float = 5.0,
        initial_resources: Optional[Mapping[str, Any]] = None,
        failure_reward: Optional[float] = None,
    ) -> None:
        if mode != "v1":
            raise ValueError(
                f"AgentModeDaemon mode {mode!r} is not supported: only the store mode 'v1' is (the v0.1 HTTP protocol "
                "is not shipped; see docs/compatibility.md)"
            )
        if store is None:
            raise ValueError("AgentModeDaemon needs the run's store (store=...)")
        if train_rollout_n < 1:
            raise ValueError(f"train_rollout_n must be at least 1, got {train_rollout_n}")
        if adapter is not None and not isinstance(adapter, TraceToTripletBase):
            raise TypeError(
                f"VERL trains on triplets: the adapter must be a TraceToTripletBase, got {type(adapter).__name__}"
            )
        if pad_token_id is None:
            pad_token_id = getattr(tokenizer, "pad_token_id", None)
            if pad_token_id is None:
                pad_token_id = getattr(tokenizer, "eos_token_id", None)
            if pad_token_id is None:
                raise ValueError("pad_token_id is required when the tokenizer has neither a pad nor an eos token")
        aggregator = dict(trace_aggregator or {})
        level = str(aggregator.get("level", "transition"))
        if level not in ("transition", "trajectory"):
            raise ValueError(f"trace_aggregator.level must be 'transition' or 'trajectory', got {level!r}")
        self.port = port
        self.train_rollout_n = train_rollout_n
        self.train_information = dict(train_information or {})
        self.tokenizer = tokenizer
        self.mini_batch_size = mini_batch_size
        self.pad_token_id = int(pad_token_id)
        self.reward_fillna_value = reward_fillna_value
        self.failure_reward = check_failure_reward(failure_reward)
        self.llm_timeout_seconds = llm_timeout_seconds
        self.mode = mode
        self.store = store
        self.adapter: TraceToTripletBase = adapter if adapter is not None else TracerTraceToTriplet()
        self.trace_aggregator = aggregator
        self.level: AggregationLevel = "trajectory" if level == "trajectory" else "transition"
        self.poll_interval = poll_interval
        self.initial_resources = dict(initial_resources or {})
        self.llm_proxy = llm_proxy
        self._owns_proxy = False
        self._server_addresses: list[str] = []
        self.is_train = True
        self.resources_id: Optional[str] = None
        self._samples: dict[str, dict[str, Any]] = {}  # rollout id -> sample (with data_id)
        self._finished: dict[str, FinishedRollout] = {}

    # ------------------------------------------------------------------------------------------------ plumbing
    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a store coroutine on the process's I/O loop (verl calls the daemon from its synchronous trainer)."""
        return io_loop().run(coro)

    def close(self) -> None:
        """Stop the proxy the daemon created."""
        if self._owns_proxy and self.llm_proxy is not None and self.llm_proxy.is_running():
            self.llm_proxy.stop()

    def _model_name(self) -> str:
        model = self.train_information.get("model")
        if not model:
            raise ValueError("train_information needs the 'model' name the agents call")
        return str(model)

    def _update_proxy(self, server_addresses: Sequence[str]) -> LLMProxy:
        addresses = [address.removeprefix("http://").rstrip("/") for address in server_addresses]
        if not addresses:
            raise ValueError("No vLLM server addresses to route the agents' calls to")
        if self.llm_proxy is None:
            from agentlightning.llm_proxy import LLMProxy

            self.llm_proxy = LLMProxy(port=self.port, store=self.store)
            self._owns_proxy = True
        elif self.llm_proxy.get_store() is None:
            self.llm_proxy.set_store(self.store)
        self.llm_proxy.request_logprobs_on_every_call()  # the sampler's log-probs: verl's rollout_log_probs
        if addresses != self._server_addresses or not self.llm_proxy.is_running():
            model = self._model_name()
            upstream = self.train_information.get("upstream_model") or served_model_name(addresses[0]) or model
            self.llm_proxy.update_model_list(
                [
                    {
                        "model_name": model,
                        "litellm_params": {"model": f"hosted_vllm/{upstream}", "api_base": f"http://{address}/v1"},
                    }
                    for address in addresses
                ]
            )
            if not self.llm_proxy.is_running():
                self.llm_proxy.start()
            self._server_addresses = addresses
            logger.info("LLM proxy at %s serves %s from %s", self.llm_proxy.endpoint, model, addresses)
        return self.llm_proxy

    # ---------------------------------------------------------------------------------------------- the step
    def set_up_data_and_server(self, batch: Any, server_addresses: Sequence[str], is_train: bool = True) -> list[str]:
        """Publish the policy and enqueue the batch (n copies per training sample). Returns the rollout ids."""
        self.clear_data_and_server()
        samples = samples_from_columns(batch)
        if not samples:
            raise ValueError("The batch holds no samples")
        proxy = self._update_proxy(server_addresses)
        sampling: dict[str, Any] = {}
        if "temperature" in self.train_information:
            sampling["temperature"] = self.train_information["temperature"]
        resource = proxy.as_resource(model=self._model_name(), sampling_parameters=sampling)
        self.is_train = is_train
        return self._run(self._enqueue(samples, resource, is_train))

    async def _enqueue(self, samples: list[dict[str, Any]], resource: Any, is_train: bool) -> list[str]:
        update = await self.store.add_resources({**self.initial_resources, RESOURCE_NAME: resource})
        self.resources_id = update.resources_id
        config = RolloutConfig(timeout_seconds=self.llm_timeout_seconds, unresponsive_seconds=self.llm_timeout_seconds)
        copies = self.train_rollout_n if is_train else 1
        requests: list[EnqueueRolloutRequest] = []
        tasks: list[dict[str, Any]] = []
        for sample in samples:
            data_id = str(uuid.uuid4())
            task = {**sample, "data_id": data_id}
            for _ in range(copies):
                tasks.append(task)
                requests.append(
                    EnqueueRolloutRequest(
                        input=task,
                        mode="train" if is_train else "val",
                        resources_id=update.resources_id,
                        config=config,
                        metadata={"data_id": data_id, "is_train": is_train},
                    )
                )
        rollouts = await self.store.enqueue_many_rollouts(requests)
        for rollout, task in zip(rollouts, tasks, strict=True):
            self._samples[rollout.rollout_id] = task
        logger.info(
            "Enqueued %d %s rollouts (%d samples x %d) with resources %s",
            len(rollouts),
            "training" if is_train else "validation",
            len(samples),
            copies,
            update.resources_id,
        )
        return [rollout.rollout_id for rollout in rollouts]

    def run_until_all_finished(self, verbose: bool = True, timeout_seconds: Optional[float] = None) -> None:
        """Block until every enqueued rollout finished (succeeded, failed or cancelled).

        Raises:
            TimeoutError: `timeout_seconds` passed first (the unfinished rollouts are named and left in the store).
        """
        self._run(self._collect(verbose, timeout_seconds))

    async def _collect(self, verbose: bool, timeout_seconds: Optional[float]) -> None:
        deadline = None if timeout_seconds is None else time.monotonic() + timeout_seconds
        last_report = time.monotonic()
        while True:
            pending = [rid for rid in self._samples if rid not in self._finished]
            if not pending:
                return
            wait = self.poll_interval
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(
                        f"{len(pending)} of {len(self._samples)} rollouts did not finish within {timeout_seconds} s "
                        f"(e.g. {pending[:3]}); are runners connected to the store?"
                    )
                wait = min(wait, left)
            for rollout in await self.store.wait_for_rollouts(rollout_ids=pending, timeout=wait):
                self._finished[rollout.rollout_id] = await self._read(rollout)
            if verbose and time.monotonic() - last_report >= 30:
                last_report = time.monotonic()
                logger.info("%d of %d rollouts finished", len(self._finished), len(self._samples))

    async def _read(self, rollout: Rollout) -> FinishedRollout:
        sample = self._samples[rollout.rollout_id]
        failed = rollout.status != "succeeded"
        if failed:
            scored = self.failure_reward is not None and await read_failed_in_agent(self.store, rollout)
            logger.warning(
                "Rollout %s finished with status %s%s",
                rollout.rollout_id,
                rollout.status,
                f"; the agent raised: trained with failure_reward {self.failure_reward}" if scored else "; not trained",
            )
            if not scored:
                return FinishedRollout(rollout, sample, [], None)
        spans = list(await self.store.query_spans(rollout.rollout_id, "latest"))
        try:
            calls = self.adapter._training_calls(spans)  # pyright: ignore[reportPrivateUsage]
        except Exception as exc:
            logger.warning(
                "Rollout %s: the adapter failed (%r); it counts as a rollout without triplets", rollout.rollout_id, exc
            )
            calls = []
        triplets = [triplet for _, triplet in calls]
        outcome = rollout_rewards([span for span, _ in calls], spans, failed=failed).outcome
        reward = self.failure_reward if failed else outcome  # the rollout's outcome, whatever the triplets carry
        if not failed and not triplets:
            logger.warning("Rollout %s succeeded without LLM calls the adapter could read", rollout.rollout_id)
        records = index_proxy_calls(spans).records_for(triplets)
        logprobs: list[Optional[Sequence[float]]] = [record.logprobs if record else None for record in records]
        return FinishedRollout(rollout, sample, triplets, reward, logprobs, failed_scored=failed)

    @property
    def finished(self) -> list[FinishedRollout]:
        """The finished rollouts of the current batch, in enqueue order."""
        return [self._finished[rid] for rid in self._samples if rid in self._finished]

    def get_train_batch(
        self, max_prompt_length: int, max_response_length: int, *, skip_single_row_groups: bool = False
    ) -> VerlBatch:
        """The training rows of the finished rollouts (see `batch.build_batch`), plus status counts in `metrics`."""
        if not self.is_train:
            raise RuntimeError("get_train_batch is for training batches; this one was set up for validation")
        finished = self.finished
        trained = [item for item in finished if item.rollout.status == "succeeded" or item.failed_scored]
        batch = build_batch(
            [item.trace() for item in trained],
            max_prompt_length=max_prompt_length,
            max_response_length=max_response_length,
            pad_token_id=self.pad_token_id,
            level=self.level,
            reward_fillna_value=self.reward_fillna_value,
            skip_single_row_groups=skip_single_row_groups,
        )
        batch.metrics["training/n_rollouts"] = float(len(finished))
        batch.metrics["training/n_rollouts_failed"] = float(
            sum(item.rollout.status != "succeeded" and not item.failed_scored for item in finished)
        )
        batch.metrics["training/n_rollouts_failed_scored"] = float(sum(item.failed_scored for item in finished))
        return batch

    def get_train_data_batch(
        self, max_prompt_length: int, max_response_length: int, device: Any = None
    ) -> tuple[Any, dict[str, float]]:
        """`get_train_batch` as a `verl.DataProto` on `device`, with its metrics (needs the `verl` extra)."""
        batch = self.get_train_batch(max_prompt_length, max_response_length)
        return batch.to_data_proto(device), dict(batch.metrics)

    def get_test_metrics(self) -> dict[str, float]:
        """Validation metrics: `val/reward`, `val/n_rollouts`, `val/n_rollouts_w_trace`, `val/mean_response_length`,
        `val/sum_response_length`, `val/turn_count`, and `val/<data_source>/...` for samples with a `data_source`."""
        groups: dict[str, list[FinishedRollout]] = {"": self.finished}
        for item in self.finished:
            source = item.sample.get("data_source")
            if source is not None:
                groups.setdefault(f"{source}/", []).append(item)
        metrics: dict[str, float] = {}
        for prefix, items in groups.items():
            rewards = [self._filled(item.reward) for item in items]
            lengths = [
                sum(
                    len(t.response.get("token_ids") or []) if isinstance(t.response, Mapping) else 0
                    for t in item.triplets
                )
                for item in items
            ]
            traced = [item for item in items if item.triplets]
            metrics[f"val/{prefix}reward"] = sum(rewards) / len(rewards) if rewards else 0.0
            metrics[f"val/{prefix}n_rollouts"] = float(len(items))
            metrics[f"val/{prefix}n_rollouts_w_trace"] = float(len(traced))
            metrics[f"val/{prefix}mean_response_length"] = sum(lengths) / len(lengths) if lengths else 0.0
            metrics[f"val/{prefix}sum_response_length"] = float(sum(lengths))
            metrics[f"val/{prefix}turn_count"] = (
                sum(len(item.triplets) for item in items) / len(items) if items else 0.0
            )
        return metrics

    def _filled(self, reward: Optional[float]) -> float:
        if reward is None or not math.isfinite(reward):
            return self.reward_fillna_value
        return reward

    def clear_data_and_server(self) -> None:
        """Forget the current batch (the rollouts stay in the store)."""
        self._samples = {}
        self._finished = {}
