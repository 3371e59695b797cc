"""Exports load into TRL as they are: `datasets.load_dataset("json")`, then SFTTrainer / DPOTrainer, no conversion.

The calls' token ids come from a real tokenizer and chat template (the tiny model's), so the conversation stitches
exactly as a served model's would. Needs `datasets` and `trl` (`pip install 'agentlightning[bench]'`); skipped
without them.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch", reason="the inference extra (torch) is not installed")

from agentlightning.export import ExportOptions, export_store, open_writer
from agentlightning.store.memory import InMemoryLightningStore

from .builders import Call, add_rollout

HINT = "loading exports into TRL needs datasets and trl: pip install 'agentlightning[bench]' (or pip install trl)"


def _tiny() -> tuple[Any, Any]:
    from agentlightning.inference.tiny import build_tiny_engine

    engine = build_tiny_engine(seed=0)
    return engine.model, engine.tokenizer


def _ids(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    return list(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False))


async def _conversation(store: Any, tokenizer: Any, answers: tuple[str, str], reward: float) -> None:
    """A tool-using conversation of two calls, ids rendered by the chat template as a server would."""
    first = [{"role": "user", "content": "add 2 and 3"}]
    second = [*first, {"role": "assistant", "content": answers[0]}, {"role": "tool", "content": "5"}]
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    calls = [
        Call(_ids(tokenizer, first), [*tokenizer.encode(answers[0]), end], prompt=first, answer=answers[0]),
        Call(_ids(tokenizer, second), [*tokenizer.encode(answers[1]), end], prompt=second, answer=answers[1]),
    ]
    await add_rollout(store, calls, reward=reward, metadata={"grpo": {"step": 1, "group": 0}})


async def _export(tmp_path: Path, kind: str, tokenizer: Any) -> Path:
    store = InMemoryLightningStore()
    await _conversation(store, tokenizer, ("add(2, 3)", "5"), reward=1.0)
    await _conversation(store, tokenizer, ("add(2, 2)", "4"), reward=0.0)
    path = tmp_path / f"{kind}.jsonl"
    writer = open_writer("jsonl", kind, path)  # type: ignore[arg-type]
    summary = await export_store(store, writer, ExportOptions(kind=kind))  # type: ignore[arg-type]
    writer.close()
    assert summary.drifted_calls == 0 and summary.conversations == 2
    return path


async def _loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> tuple[Any, Any, Any, Any]:
    """TRL, the tiny model and tokenizer, and the `kind` export read back by `datasets.load_dataset("json")`."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    datasets = pytest.importorskip("datasets", reason=HINT)
    trl = pytest.importorskip("trl", reason=HINT)
    model, tokenizer = _tiny()
    path = await _export(tmp_path, kind, tokenizer)
    dataset = datasets.load_dataset("json", data_files=str(path), split="train", cache_dir=str(tmp_path / "cache"))
    return trl, model, tokenizer, dataset


async def test_the_sft_export_trains_in_trl_sft_trainer_on_the_models_own_tokens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trl, model, tokenizer, dataset = await _loaded(tmp_path, monkeypatch, "sft")
    args = trl.SFTConfig(
        output_dir=str(tmp_path / "out"),
        max_steps=1,
        per_device_train_batch_size=2,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        dataset_num_proc=None,
    )
    trainer = trl.SFTTrainer(model=model, processing_class=tokenizer, train_dataset=dataset, args=args)
    row = trainer.train_dataset[0]
    exported = dataset[0]
    assert row["input_ids"] == exported["input_ids"]  # the exact ids, not re-tokenized
    assert row["labels"] == [
        t if m else -100 for t, m in zip(exported["input_ids"], exported["assistant_masks"], strict=True)
    ]
    trained = [t for t in row["labels"] if t != -100]
    assert tokenizer.decode(trained) == "add(2, 3)<|im_end|>5<|im_end|>"  # both answers, not the tool's result
    assert math.isfinite(trainer.train().training_loss)


async def test_the_preference_export_is_read_by_trl_dpo_trainer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trl, model, tokenizer, dataset = await _loaded(tmp_path, monkeypatch, "preference")
    args = trl.DPOConfig(
        output_dir=str(tmp_path / "out"),
        max_steps=1,
        per_device_train_batch_size=1,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
    )
    reference = copy.deepcopy(model).eval()
    trainer = trl.DPOTrainer(
        model=model, ref_model=reference, processing_class=tokenizer, train_dataset=dataset, args=args
    )
    row = trainer.train_dataset[0]
    exported = dataset[0]
    # DPOTrainer renders the messages again: with a stable template it gives the captured ids, plus the template's
    # text after the last end-of-turn token (here a newline) that the model never generated
    assert row["prompt_ids"] == exported["prompt_ids"]
    for side in ("chosen_ids", "rejected_ids"):
        assert row[side][: len(exported[side])] == exported[side]
        assert tokenizer.decode(row[side][len(exported[side]) :]) == "\n"
    assert math.isfinite(trainer.train().training_loss)


_ADD = {"name": "add", "description": "adds", "parameters": {"type": "object", "properties": {"a": {}, "b": {}}}}


async def _tool_conversation(store: Any, engine: Any, a: int, answer: str, reward: float) -> None:
    """A call of the tool `add`, its result, and the answer: the prompts rendered by the engine exactly as the
    inference server renders them for a template without tool support (the tiny model's, like SmolLM2's)."""
    tools = [{"type": "function", "function": _ADD}]
    tokenizer = engine.tokenizer
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    call = {"id": "call-1", "type": "function", "function": {"name": "add", "arguments": json.dumps({"a": a, "b": 3})}}
    call_text = f'<tool_call>\n{{"name": "add", "arguments": {{"a": {a}, "b": 3}}}}\n</tool_call>'
    first = [{"role": "user", "content": "add 2 and 3"}]
    second = [
        *first,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "content": str(a + 3), "tool_call_id": "call-1"},
    ]
    function = {**_ADD, "parameters": json.dumps(_ADD["parameters"])}  # as the LLM proxy records it
    recorded_second = [  # as the LLM proxy records them: calls as JSON text, no null content
        {"role": "assistant", "tool_calls": json.dumps([call])} if m["role"] == "assistant" else m for m in second
    ]
    calls = [
        Call(
            engine.chat_prompt(first, tools),
            [*tokenizer.encode(call_text), end],
            prompt=first,
            answer="",
            tool_calls=json.dumps([call]),
            functions=[function],
        ),
        Call(
            engine.chat_prompt(second, tools),
            [*tokenizer.encode(answer), end],
            prompt=recorded_second,
            answer=answer,
            functions=[function],
        ),
    ]
    await add_rollout(store, calls, reward=reward, metadata={"grpo": {"step": 1, "group": 0}})


async def _tool_pairs(tmp_path: Path, engine: Any, tool_turns: str) -> Path:
    store = InMemoryLightningStore()
    await _tool_conversation(store, engine, 2, "5", reward=1.0)
    await _tool_conversation(store, engine, 1, "4", reward=0.0)
    path = tmp_path / f"pairs-{tool_turns}.jsonl"
    writer = open_writer("jsonl", "preference", path)
    summary = await export_store(store, writer, ExportOptions(kind="preference", tool_turns=tool_turns))  # type: ignore[arg-type]
    writer.close()
    assert summary.records == 1 and summary.drifted_calls == 0
    return path


async def test_with_text_tool_turns_dpo_trainer_rebuilds_the_captured_ids_of_tool_calls_on_a_chatml_template(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    datasets = pytest.importorskip("datasets", reason=HINT)
    trl = pytest.importorskip("trl", reason=HINT)
    from agentlightning.inference.tiny import build_tiny_engine

    engine = build_tiny_engine(seed=0)
    path = await _tool_pairs(tmp_path, engine, "text")
    dataset = datasets.load_dataset("json", data_files=str(path), split="train", cache_dir=str(tmp_path / "cache"))
    exported = dataset[0]
    assert exported["tools"] is None and "<tool_call>" in exported["chosen"][0]["content"]
    args = trl.DPOConfig(
        output_dir=str(tmp_path / "out"),
        max_steps=1,
        per_device_train_batch_size=1,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
    )
    model = engine.model
    trainer = trl.DPOTrainer(
        model=model,
        ref_model=copy.deepcopy(model).eval(),
        processing_class=engine.tokenizer,
        train_dataset=dataset,
        args=args,
    )
    row = trainer.train_dataset[0]
    assert row["prompt_ids"] == exported["prompt_ids"]  # the system message with the tools, as the model saw it
    for side in ("chosen_ids", "rejected_ids"):  # the call, the tool's result and the answer, token for token
        assert row[side][: len(exported[side])] == exported[side]
        assert engine.tokenizer.decode(row[side][len(exported[side]) :]) == "\n"
    assert math.isfinite(trainer.train().training_loss)
    engine.close()


async def test_with_openai_tool_turns_a_chatml_template_cannot_render_the_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The documented limit: a template that concatenates `content` (SmolLM2's, ChatML) cannot render an assistant
    turn whose calls are in `tool_calls` (its content is null), so the default export needs `--tool-turns text`."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    datasets = pytest.importorskip("datasets", reason=HINT)
    from agentlightning.inference.tiny import build_tiny_engine

    engine = build_tiny_engine(seed=0)
    path = await _tool_pairs(tmp_path, engine, "openai")
    exported = datasets.load_dataset("json", data_files=str(path), split="train", cache_dir=str(tmp_path / "c"))[0]
    conversation = [*exported["prompt"], *exported["chosen"]]
    assert conversation[1]["content"] is None and conversation[1]["tool_calls"]
    from jinja2.exceptions import UndefinedError

    with pytest.raises((TypeError, UndefinedError)):  # `'<|im_start|>' + role + content`: content is null
        engine.tokenizer.apply_chat_template(conversation, tokenize=False)
    engine.close()
