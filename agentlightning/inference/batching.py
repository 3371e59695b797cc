"""Continuous batching: one scheduler thread runs every sequence of every request in one batched forward per step.

A request is prefilled alone (its prompt once, whatever `n`), samples its first tokens, and its `n` rows then join
the running batch. The batch keeps one key/value cache, left-padded to the longest row, with an attention mask and
explicit position ids so that each row sees exactly its own tokens. Between two decoding steps the scheduler
admits waiting requests and retires finished or cancelled rows (dropping their cache rows and any padding no
longer needed). Sampling, log-probs, stop tokens and stop strings are decided per request, with the request's own
seeded generator, so a request's results do not depend on the requests it shares the batch with (up to the
floating-point rounding of batched arithmetic).

Rows may use different LoRA adapters (`SamplingParams.adapter`, see `adapters.py`), each row applying its own: the
base-model requests admitted together are prefilled as one batch (prompt prefixes are kept and reused for them only),
the requests of any adapters as another, and the decoding batch mixes them all.

`exclusive()` gives a caller the model alone: new requests wait, rows already running finish first (on the
weights they started with), and nothing runs until the caller leaves. Weight swaps use it.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional, Protocol

from .batch_cache import append_rows, keep_rows, output_cache, select_rows
from .prefixes import PrefixCache
from .sampling import SamplingParams, choose_tokens, make_generator
from .sequences import ChoiceStep, SequenceState, StepUpdate, TokenLogprob

if TYPE_CHECKING:
    import torch


logger = logging.getLogger(__name__)

IDLE_EXIT_SECONDS = 30.0
"""The scheduler thread ends after this long without work (a new request starts it again)."""


Sink = Callable[[StepUpdate], None]


@dataclass(eq=False)
class BatchRequest:
    """One submitted generation: its prompt, parameters and where its step updates go."""

    prompt_ids: list[int]
    params: SamplingParams
    sink: Sink
    stop_ids: frozenset[int]
    cancelled: bool = False
    weights_version: str = ""
    slot: int = 0  # the LoRA adapter slot its rows use (0: the base model), resolved when it is prefilled
    generator: Any = None
    choices: list[SequenceState] = field(default_factory=list)  # scheduler-owned

    def cancel(self) -> None:
        """Stop generating for this request (its rows leave the batch at the next step)."""
        self.cancelled = True


@dataclass(eq=False)
class _Row:
    request: BatchRequest
    choice: SequenceState
    last_token: int
    position: int  # position id of `last_token`, i.e. the number of real tokens already in the cache

    @property
    def slot(self) -> int:
        return self.request.slot


class ScheduledEngine(Protocol):
    """What the scheduler uses of its engine (`InferenceEngine`): the model and its adapters, and the per-token rules
    (log-probs, stop rules and text), which stay the engine's since they need its tokenizer."""

    model: Any
    device: Any
    adapters: Any
    weights_version: str

    @property
    def torch(self) -> Any: ...

    def draw_seed(self) -> Optional[int]: ...

    def token_logprob(self, log_probs: torch.Tensor, token: int, top: int) -> TokenLogprob: ...

    def advance(
        self, sequence: SequenceState, token: int, entry: Optional[TokenLogprob], params: SamplingParams,
        stop_ids: frozenset[int],
    ) -> ChoiceStep: ...  # fmt: skip


class BatchScheduler:
    """Owns the model's forward passes for one engine (see the module docstring)."""

    def __init__(self, engine: ScheduledEngine, *, max_batch_size: int = 32, max_prefill_tokens: int = 2048) -> None:
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be at least 1, got {max_batch_size}")
        self.engine = engine
        self.max_batch_size = max_batch_size
        self.max_prefill_tokens = max_prefill_tokens
        self._cond = threading.Condition()
        self._pending: deque[BatchRequest] = deque()
        self._thread: Optional[threading.Thread] = None
        self._exclusive_waiting = 0
        self._exclusive_held = False
        self._stepping = False
        self._closed = False
        # Touched only by the scheduler thread (or under exclusive access):
        self._rows: list[_Row] = []
        self._cache: Any = None
        self._cache_name: Optional[str] = None  # the model's name for its key/value cache argument
        self._mask: Optional[torch.Tensor] = None
        self.steps = 0
        self.largest_batch = 0
        self.prefill_stats = {"prompts": 0, "computed": 0}  # prompts prefilled, and how many were computed
        self.prefixes = PrefixCache()

    # ----------------------------------------------------------------------------------------------- public API
    def submit(
        self, prompt_ids: list[int], params: SamplingParams, sink: Sink, stop_ids: frozenset[int]
    ) -> BatchRequest:
        """Queue a request; its updates are passed to `sink` from the scheduler thread, in order."""
        request = BatchRequest(prompt_ids=list(prompt_ids), params=params, sink=sink, stop_ids=stop_ids)
        with self._cond:
            if self._closed:
                raise RuntimeError("The inference engine is closed")
            self._pending.append(request)
            self._ensure_thread()
            self._cond.notify_all()
        return request

    @property
    def running_rows(self) -> int:
        """Sequences currently in the batch."""
        return len(self._rows)

    @property
    def waiting_requests(self) -> int:
        """Requests submitted but not yet admitted into the batch."""
        return len(self._pending)

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the model alone: waits for running rows to finish; new requests wait until the block ends."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("exclusive() cannot be entered from the scheduler thread")
        with self._cond:
            self._exclusive_waiting += 1
            try:
                while self._rows or self._stepping or self._exclusive_held:
                    self._cond.wait()
            finally:
                self._exclusive_waiting -= 1
            self._exclusive_held = True
        try:
            yield
        finally:
            with self._cond:
                self._exclusive_held = False
                self._cond.notify_all()

    def close(self) -> None:
        """Fail waiting requests and stop the thread once running rows are done."""
        with self._cond:
            self._closed = True
            pending = list(self._pending)
            self._pending.clear()
            self._cond.notify_all()
            thread = self._thread
        for request in pending:
            self._send(request, RuntimeError("The inference engine was closed"))
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=60)

    # ------------------------------------------------------------------------------------------------- the loop
    def _ensure_thread(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="agl-inference-batch", daemon=True)
            self._thread.start()

    def _admissible(self) -> bool:
        return bool(self._pending) and not self._exclusive_waiting and not self._exclusive_held

    def _run(self) -> None:
        import torch

        while True:
            with self._cond:
                while not self._rows and not self._admissible():
                    if self._closed and not self._pending:
                        self._thread = None
                        return
                    if not self._cond.wait(timeout=IDLE_EXIT_SECONDS) and not self._rows and not self._pending:
                        self._thread = None
                        return
                admitted: list[BatchRequest] = []
                room = self.max_batch_size - len(self._rows)
                while self._admissible() and (room >= self._pending[0].params.n or not (self._rows or admitted)):
                    request = self._pending.popleft()
                    room -= request.params.n
                    admitted.append(request)
                self._stepping = True
            try:
                with torch.inference_mode():
                    for group in self._prefill_groups(admitted):
                        self._prefill(group)
                    if self._rows:
                        self._decode()
            finally:
                with self._cond:
                    self._stepping = False
                    self._cond.notify_all()

    # ------------------------------------------------------------------------------------------------- prefill
    def _prefill_groups(self, requests: list[BatchRequest]) -> list[list[BatchRequest]]:
        """Split admitted requests into prefill batches of at most `max_prefill_tokens` (padded) tokens: base-model
        requests together (they may start from a kept prompt prefix), requests of any adapters together (each row
        applying its own). Resolves each request's adapter slot (one unloaded meanwhile fails alone) and draws its
        generator, in the order the requests arrived."""
        engine = self.engine
        base: list[BatchRequest] = []
        adapted: list[BatchRequest] = []
        for request in requests:
            if request.cancelled:
                continue
            try:
                request.slot = engine.adapters.slot(request.params.adapter)
            except KeyError as exc:
                self._send(request, ValueError(str(exc.args[0])))
                continue
            seed = request.params.seed if request.params.seed is not None else engine.draw_seed()
            request.generator = make_generator(seed)
            (adapted if request.slot else base).append(request)
        groups: list[list[BatchRequest]] = []
        for kind in (base, adapted):
            current: list[BatchRequest] = []
            longest = 0
            for request in kind:
                length = len(request.prompt_ids)
                if current and (len(current) + 1) * max(longest, length) > self.max_prefill_tokens:
                    groups.append(current)
                    current, longest = [], 0
                current.append(request)
                longest = max(longest, length)
            if current:
                groups.append(current)
        return groups

    def _prefill(self, requests: list[BatchRequest]) -> None:
        """Run the prompts of `requests` as one left-padded batch, sample their first tokens, join the batch."""
        engine = self.engine
        torch = engine.torch
        try:
            # Identical prompts of one adapter (a GRPO group's first calls) are computed once; their rows share its
            # cache row.
            prompts: list[list[int]] = []
            slots: list[int] = []
            owner: list[int] = []
            seen: dict[tuple[int, tuple[int, ...]], int] = {}
            for request in requests:
                key = (request.slot, tuple(request.prompt_ids))
                if key not in seen:
                    seen[key] = len(prompts)
                    prompts.append(request.prompt_ids)
                    slots.append(request.slot)
                owner.append(seen[key])
            self.prefill_stats["prompts"] += len(requests)
            self.prefill_stats["computed"] += len(prompts)
            with engine.adapters.rows(slots):
                output, mask, _kept = self._prefill_prompts(prompts, with_prefixes=not any(slots))
            logits = output.logits[:, -1, :].float()
            rows: list[_Row] = []
            sources: list[int] = []
            for index, request in enumerate(requests):
                adapter = request.params.adapter
                version = engine.adapters.version(adapter) if adapter is not None else engine.weights_version
                request.weights_version = version
                request.choices = [SequenceState(index=i, weights_version=version) for i in range(request.params.n)]
                for choice in request.choices:
                    rows.append(_Row(request, choice, last_token=-1, position=len(request.prompt_ids)))
                    sources.append(owner[index])
            self._sample(logits.index_select(0, torch.tensor(sources, dtype=torch.long, device=logits.device)), rows)
        except Exception as exc:
            logger.exception("Prefill failed")
            for request in requests:
                self._send(request, exc)
            return
        alive = [i for i, row in enumerate(rows) if row.choice.finish_reason is None and not row.request.cancelled]
        if alive:
            self._merge(output_cache(output), mask, [sources[i] for i in alive], [rows[i] for i in alive])

    def _prefill_prompts(self, prompts: list[list[int]], *, with_prefixes: bool) -> tuple[Any, Any, Any]:
        """The prefill output and mask of `prompts`, and the kept prefix it started from (None: none); prefixes are
        looked up and learned only `with_prefixes` (base-model requests: kept keys and values are the base's)."""
        if not with_prefixes:
            output, mask = self._run_prompts(prompts, None)
            return output, mask, None
        self.prefixes.check_version(self.engine.weights_version)
        kept = self.prefixes.find(prompts)
        output, mask = self._run_prompts(prompts, kept) if kept is not None else (None, None)
        if output is None or mask is None:
            kept = None
            output, mask = self._run_prompts(prompts, None)
        self._learn_prefixes(prompts, output, mask, kept)
        return output, mask, kept

    def _run_prompts(self, prompts: list[list[int]], kept: Any) -> tuple[Any, Any]:
        """Prefill `prompts` as one left-padded batch; after a kept prefix, only the rest of each prompt is run (its
        rows read `[prefix][padding][rest]`). Returns the output and the attention mask of the rows (None, None when
        the kept prefix cannot be used with this model: the caller runs the whole prompts)."""
        torch = self.engine.torch
        start = kept.length if kept is not None else 0
        rests = [prompt[start:] for prompt in prompts]
        longest = max(len(rest) for rest in rests)
        input_ids = torch.zeros((len(rests), longest), dtype=torch.long)
        rest_mask = torch.zeros((len(rests), longest), dtype=torch.long)
        for index, rest in enumerate(rests):
            input_ids[index, longest - len(rest) :] = torch.tensor(rest, dtype=torch.long)
            rest_mask[index, longest - len(rest) :] = 1
        device = self.engine.device
        input_ids, rest_mask = input_ids.to(device), rest_mask.to(device)  # built here, moved once
        if kept is None:
            kwargs: dict[str, Any] = {"input_ids": input_ids, "use_cache": True}
            if len({len(rest) for rest in rests}) > 1:
                kwargs["attention_mask"] = rest_mask
                kwargs["position_ids"] = (rest_mask.cumsum(dim=1) - 1).clamp(min=0)
            return self._forward(keep_last=True, **kwargs), rest_mask
        try:
            from transformers import DynamicCache

            cache = DynamicCache()
            for layer, (keys, values) in enumerate(zip(kept.keys, kept.values, strict=True)):
                rows = len(rests)
                cache.update(keys.expand(rows, -1, -1, -1).clone(), values.expand(rows, -1, -1, -1).clone(), layer)
            prefix_mask = torch.ones((len(rests), kept.length), dtype=torch.long, device=device)
            mask = torch.cat([prefix_mask, rest_mask], dim=1)
            output = self._forward(
                keep_last=True,
                input_ids=input_ids,
                attention_mask=mask,
                position_ids=(mask.cumsum(dim=1) - 1).clamp(min=0)[:, kept.length :],
                use_cache=True,
                **{self._cache_argument(): cache},
            )
        except Exception:
            logger.warning("Prefilling after a kept prompt prefix failed; prefix caching is off", exc_info=True)
            self.prefixes.enabled = False
            return None, None
        self.prefixes.hits += len(prompts)
        self.prefixes.saved_tokens += kept.length * len(prompts)
        return output, mask

    def _learn_prefixes(self, prompts: list[list[int]], output: Any, mask: Any, kept: Any) -> None:
        """Keep the keys and values of a prefix worth keeping (see prefixes.py), cut out of this prefill."""
        if not self.prefixes.enabled:
            return
        try:
            cache = output_cache(output)
            layers = cache.layers
            width = int(mask.shape[1])
            start = kept.length if kept is not None else 0
            for row, prompt in enumerate(prompts):
                length = self.prefixes.candidate(prompt)
                rest = len(prompt) - start
                padding = width - start - rest  # columns of padding before this row's own ids
                if not length or (kept is not None and padding and length > start):
                    continue  # a kept prefix's row with padding after the prefix cannot give a longer one
                offset = 0 if kept is not None else padding
                keys = [layer.keys[row : row + 1, :, offset : offset + length, :].clone() for layer in layers]
                values = [layer.values[row : row + 1, :, offset : offset + length, :].clone() for layer in layers]
                self.prefixes.keep(prompt[:length], keys, values)
        except Exception:
            logger.warning("Could not keep a prompt prefix; prefix caching is off", exc_info=True)
            self.prefixes.enabled = False

    def _cache_argument(self) -> str:
        """The name under which the model takes its key/value cache: `cache` in transformers versions that renamed
        `past_key_values` (which they still accept, with a FutureWarning on every call)."""
        if self._cache_name is None:
            import inspect

            try:
                parameters = inspect.signature(self.engine.model.forward).parameters
            except (TypeError, ValueError):
                parameters = {}
            self._cache_name = "cache" if "cache" in parameters else "past_key_values"
        return self._cache_name

    def _forward(self, *, keep_last: bool = False, **kwargs: Any) -> Any:
        if keep_last:
            try:
                return self.engine.model(logits_to_keep=1, **kwargs)
            except TypeError:  # a model without `logits_to_keep`
                pass
        return self.engine.model(**kwargs)

    def _merge(self, cache: Any, mask: torch.Tensor, sources: list[int], rows: list[_Row]) -> None:
        """Add prefilled rows to the running batch; row i uses row `sources[i]` of the prefill `cache` and `mask`."""
        torch = self.engine.torch
        mask = select_rows(cache, mask, torch.tensor(sources, dtype=torch.long, device=mask.device))
        if self._cache is None or self._mask is None:
            self._cache, self._mask, self._rows = cache, mask, list(rows)
        else:
            self._mask = append_rows(self._cache, self._mask, cache, mask)
            self._rows.extend(rows)
        self.largest_batch = max(self.largest_batch, len(self._rows))

    # -------------------------------------------------------------------------------------------------- decode
    def _decode(self) -> None:
        torch = self.engine.torch
        rows = self._rows
        assert self._mask is not None
        try:
            device = self._mask.device
            input_ids = torch.tensor([[row.last_token] for row in rows], dtype=torch.long, device=device)
            positions = torch.tensor([[row.position] for row in rows], dtype=torch.long, device=device)
            mask = torch.cat([self._mask, torch.ones((len(rows), 1), dtype=torch.long, device=device)], dim=1)
            with self.engine.adapters.rows([row.slot for row in rows]):
                output = self._forward(
                    input_ids=input_ids,
                    attention_mask=mask,
                    position_ids=positions,
                    use_cache=True,
                    **{self._cache_argument(): self._cache},
                )
            self._cache, self._mask = output_cache(output), mask
            self.steps += 1
            for row in rows:
                row.position += 1
            self._sample(output.logits[:, -1, :].float(), rows)
        except Exception as exc:
            logger.exception("A batched decoding step failed; failing the %d running sequences", len(rows))
            for request in {id(row.request): row.request for row in rows}.values():
                self._send(request, exc)
            self._rows, self._cache, self._mask = [], None, None
            return
        self._retire()

    def _retire(self) -> None:
        """Drop finished and cancelled rows, and padding columns no remaining row needs."""
        keep = [i for i, row in enumerate(self._rows) if row.choice.finish_reason is None and not row.request.cancelled]
        if len(keep) == len(self._rows):
            return
        if not keep:
            self._rows, self._cache, self._mask = [], None, None
            return
        assert self._mask is not None
        self._mask = keep_rows(self._cache, self._mask, keep)
        self._rows = [self._rows[i] for i in keep]

    # ------------------------------------------------------------------------------------------------ sampling
    def _sample(self, logits: torch.Tensor, rows: list[_Row]) -> None:
        """Choose the next token of every row (per request, with its own generator) and report the steps."""
        torch = self.engine.torch
        groups: dict[int, list[int]] = {}
        for position, row in enumerate(rows):
            groups.setdefault(id(row.request), []).append(position)
        for positions in groups.values():
            request = rows[positions[0]].request
            if request.cancelled:
                continue
            params = request.params
            index = torch.tensor(positions, dtype=torch.long, device=logits.device)
            request_logits = logits.index_select(0, index) if len(positions) != logits.shape[0] else logits
            chosen = choose_tokens(request_logits, params, request.generator).tolist()
            log_probs = None
            if params.logprobs:  # of the distribution the token is drawn from: the logits at the temperature
                scale = params.temperature if params.temperature > 0 else 1.0
                log_probs = torch.log_softmax(request_logits.float() / scale, dim=-1)
            steps: list[ChoiceStep] = []
            for offset, position in enumerate(positions):
                row = rows[position]
                token = int(chosen[offset])
                entry = None
                if log_probs is not None:
                    entry = self.engine.token_logprob(log_probs[offset], token, params.top_logprobs)
                steps.append(self.engine.advance(row.choice, token, entry, params, request.stop_ids))
                row.last_token = token
            self._send(request, steps)

    def _send(self, request: BatchRequest, update: StepUpdate) -> None:
        try:
            request.sink(update)
        except Exception:  # the consumer is gone (its event loop closed): stop generating for it
            request.cancelled = True
