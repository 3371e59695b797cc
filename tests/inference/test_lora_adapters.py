"""Several LoRA adapters served at once on one base model: each request names its adapter, rows of different
adapters share a batch, an adapter's weights are swapped in place and the base model never changes."""

from __future__ import annotations

import asyncio
import copy
import threading
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore:.*is_gradient_checkpointing:FutureWarning")  # peft reads it

from agentlightning.inference.adapters import AdapterError, read_peft_adapter  # noqa: E402
from agentlightning.inference.engine import InferenceEngine  # noqa: E402
from agentlightning.inference.sampling import SamplingParams  # noqa: E402
from agentlightning.inference.tiny import build_tiny_engine  # noqa: E402

PROMPT = "hello there"
SAME_LENGTH_PROMPTS = ["hello there", "what is 2+2", "good night!", "ok, bye now"]


def adapter_weights(engine: InferenceEngine, seed: int, rank: int = 4) -> dict[str, tuple[Any, Any]]:
    """Random (A, B) pairs on every attention and MLP projection of the tiny model, large enough to change outputs."""
    generator = torch.Generator().manual_seed(seed)
    return {
        name: (
            torch.randn(rank, module.in_features, generator=generator),
            torch.randn(module.out_features, rank, generator=generator),
        )
        for name, module in engine.model.named_modules()
        if isinstance(module, torch.nn.Linear) and ".layers." in name
    }


def greedy(engine: InferenceEngine, adapter: str | None = None, tokens: int = 12) -> list[int]:
    params = SamplingParams(max_tokens=tokens, temperature=0, ignore_eos=True, adapter=adapter)
    return engine.generate(engine.encode(PROMPT), params)[0].token_ids


@pytest.fixture
def engine() -> InferenceEngine:
    return build_tiny_engine(seed=0)


def test_an_adapter_changes_its_requests_and_leaves_the_base_model_alone(engine: InferenceEngine) -> None:
    base = greedy(engine)
    state = {name: tensor.clone() for name, tensor in engine.model.state_dict().items()}
    engine.load_adapter("a", adapter_weights(engine, 1), scale=2.0, version="v1")
    assert greedy(engine, "a") != base
    assert greedy(engine) == base
    assert all(torch.equal(state[name], tensor) for name, tensor in engine.model.state_dict().items())


def test_two_adapters_give_different_outputs(engine: InferenceEngine) -> None:
    engine.load_adapter("a", adapter_weights(engine, 1), scale=2.0, version="v1")
    engine.load_adapter("b", adapter_weights(engine, 2, rank=8), scale=2.0, version="v1")
    assert greedy(engine, "a") != greedy(engine, "b")


def test_rows_of_different_adapters_in_one_batch_match_their_outputs_alone(engine: InferenceEngine) -> None:
    engine.load_adapter("a", adapter_weights(engine, 1), scale=2.0, version="v1")
    engine.load_adapter("b", adapter_weights(engine, 2, rank=8), scale=2.0, version="v1")
    alone = {name: greedy(engine, name) for name in (None, "a", "b")}
    results: dict[int, list[int]] = {}
    names = [None, "a", "b"] * 4
    start = threading.Barrier(len(names))

    def run(index: int) -> None:
        start.wait()
        results[index] = greedy(engine, names[index])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(names))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(results[i] == alone[name] for i, name in enumerate(names))
    assert engine.batch_stats["largest_batch"] > 1  # they did share decoding steps


def merged(engine: InferenceEngine, weights: dict[str, tuple[Any, Any]], scale: float) -> Any:
    """A copy of the engine's model with the adapter merged into its weights: W + scale * B @ A."""
    model = copy.deepcopy(engine.model)
    with torch.no_grad():
        for name, module in model.named_modules():
            if name in weights:
                a, b = weights[name]
                module.weight += scale * b @ a
    return model


def served_logits(engine: InferenceEngine, names: list[str | None]) -> Any:
    """Logits of one batched forward whose row i (prompt i) uses adapter `names[i]`."""
    ids = torch.tensor([engine.encode(SAME_LENGTH_PROMPTS[i]) for i in range(len(names))])
    with torch.no_grad(), engine.adapters.rows([engine.adapters.slot(name) for name in names]):
        return engine.model(input_ids=ids).logits


def assert_rows_match_merged(engine: InferenceEngine, names: list[str | None], merged_models: dict[Any, Any]) -> None:
    served = served_logits(engine, names)
    for row, name in enumerate(names):
        ids = torch.tensor([engine.encode(SAME_LENGTH_PROMPTS[row])])
        with torch.no_grad():
            expected = merged_models[name](input_ids=ids).logits[0]
        torch.testing.assert_close(served[row], expected, rtol=1e-4, atol=1e-4)  # batched float32 rounding


def test_rows_of_a_mixed_batch_match_the_model_with_their_adapter_merged(engine: InferenceEngine) -> None:
    a, b = adapter_weights(engine, 1), adapter_weights(engine, 2, rank=8)
    engine.load_adapter("a", a, scale=2.0, version="v1")
    engine.load_adapter("b", b, scale=0.5, version="v1")
    models = {None: engine.model, "a": merged(engine, a, 2.0), "b": merged(engine, b, 0.5)}
    assert_rows_match_merged(engine, [None, "a", "b", "a"], models)
    assert not torch.allclose(served_logits(engine, ["a"]), served_logits(engine, ["b"]), atol=1e-3)


def test_a_batch_of_one_adapter_matches_the_model_with_it_merged(engine: InferenceEngine) -> None:
    a, b = adapter_weights(engine, 1), adapter_weights(engine, 2, rank=8)
    engine.load_adapter("a", a, scale=2.0, version="v1")
    engine.load_adapter("b", b, scale=0.5, version="v1")
    assert_rows_match_merged(engine, ["b", "b", "b"], {"b": merged(engine, b, 0.5)})


def test_adapters_left_after_an_unload_still_match_their_merged_models(engine: InferenceEngine) -> None:
    weights = {name: adapter_weights(engine, seed) for seed, name in enumerate(["a", "b", "c"], start=1)}
    for name, layers in weights.items():
        engine.load_adapter(name, layers, scale=1.5, version="v1")
    engine.unload_adapter("c")  # the last slot: the stacks shrink
    engine.unload_adapter("a")  # the first slot: zeroed, kept free
    models = {None: engine.model, "b": merged(engine, weights["b"], 1.5)}
    assert_rows_match_merged(engine, [None, "b", "b", None], models)
    engine.load_adapter("d", adapter_weights(engine, 4), scale=1.5, version="v1")  # takes the free slot
    models["d"] = merged(engine, adapter_weights(engine, 4), 1.5)
    assert_rows_match_merged(engine, ["d", None, "b", "d"], models)


def test_an_adapter_on_some_layers_leaves_the_others_alone_in_a_mixed_batch(engine: InferenceEngine) -> None:
    everywhere = adapter_weights(engine, 1)
    q_only = {name: pair for name, pair in adapter_weights(engine, 2).items() if name.endswith("q_proj")}
    engine.load_adapter("all", everywhere, scale=1.0, version="v1")
    engine.load_adapter("q", q_only, scale=1.0, version="v1")
    models = {None: engine.model, "all": merged(engine, everywhere, 1.0), "q": merged(engine, q_only, 1.0)}
    assert_rows_match_merged(engine, ["q", "all", None, "q"], models)


def test_requests_of_several_adapters_admitted_together_get_their_answers_alone(engine: InferenceEngine) -> None:
    engine.load_adapter("a", adapter_weights(engine, 1), scale=2.0, version="v1")
    engine.load_adapter("b", adapter_weights(engine, 2, rank=8), scale=2.0, version="v1")
    names = [None, "a", "b", "a", None]
    alone = {name: greedy(engine, name) for name in set(names)}
    stats = dict(engine.batch_stats)

    async def together() -> list[Any]:
        prompt = engine.encode(PROMPT)
        with engine.paused():  # every request waits, then all are admitted at once
            tasks = [
                asyncio.ensure_future(
                    engine.agenerate(prompt, SamplingParams(max_tokens=12, temperature=0, ignore_eos=True, adapter=n))
                )
                for n in names
            ]
            await asyncio.sleep(0)
        return await asyncio.gather(*tasks)

    results = asyncio.run(together())
    assert [result[0].token_ids for result in results] == [alone[name] for name in names]
    assert engine.batch_stats["prompts_computed"] - stats["prompts_computed"] == 3  # one per adapter, not per request
    assert engine.batch_stats["largest_batch"] == len(names)


def test_swapping_an_adapter_in_place_changes_only_that_adapter(engine: InferenceEngine) -> None:
    engine.load_adapter("a", adapter_weights(engine, 1), scale=2.0, version="v1")
    engine.load_adapter("b", adapter_weights(engine, 2), scale=2.0, version="v1")
    before = {name: greedy(engine, name) for name in (None, "a", "b")}
    engine.load_adapter("a", adapter_weights(engine, 3), scale=2.0, version="v2")
    assert greedy(engine, "a") != before["a"]
    assert greedy(engine, "b") == before["b"] and greedy(engine) == before[None]
    assert engine.adapters.version("a") == "v2"


def test_a_sequence_records_the_adapter_version_it_was_generated_with(engine: InferenceEngine) -> None:
    engine.load_adapter("a", adapter_weights(engine, 1), scale=2.0, version="step-7")
    params = SamplingParams(max_tokens=3, temperature=0, adapter="a")
    assert engine.generate(engine.encode(PROMPT), params)[0].weights_version == "step-7"


def test_the_adapter_matches_peft_on_the_same_weights(engine: InferenceEngine) -> None:
    peft = pytest.importorskip("peft")

    model = peft.get_peft_model(
        copy.deepcopy(engine.model),
        peft.LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", lora_dropout=0.0, task_type="CAUSAL_LM"),
        adapter_name="solver",
    )
    weights: dict[str, tuple[Any, Any]] = {}
    with torch.no_grad():
        for name, module in model.named_modules():
            if hasattr(module, "lora_B") and "solver" in module.lora_B:
                module.lora_B["solver"].weight.normal_(0, 0.5)
                weights[name.removeprefix("base_model.model.")] = (
                    module.lora_A["solver"].weight.clone(),
                    module.lora_B["solver"].weight.clone(),
                )
    engine.load_adapter("solver", weights, scale=2.0, version="v1")
    ids = torch.tensor([engine.encode(PROMPT)])
    with torch.no_grad(), engine.adapters.rows([engine.adapters.slot("solver")]):
        served = engine.model(input_ids=ids).logits
    with torch.no_grad():
        expected = model(input_ids=ids).logits
        base = engine.model(input_ids=ids).logits
    assert torch.allclose(served, expected, atol=1e-5)
    assert not torch.allclose(base, expected, atol=1e-3)


def test_memory_grows_by_the_adapter_size(engine: InferenceEngine) -> None:
    one = adapter_weights(engine, 1)
    per_adapter = sum((a.numel() + b.numel()) * 4 for a, b in one.values())
    engine.load_adapter("a", one, scale=1.0, version="v1")
    first = engine.adapters.nbytes()
    engine.load_adapter("b", adapter_weights(engine, 2), scale=1.0, version="v1")
    assert engine.adapters.nbytes() - first == pytest.approx(per_adapter, rel=0.01)


def test_an_unloaded_adapter_is_refused_by_name(engine: InferenceEngine) -> None:
    engine.load_adapter("a", adapter_weights(engine, 1), scale=1.0, version="v1")
    engine.unload_adapter("a")
    with pytest.raises(ValueError, match="No LoRA adapter 'a' is loaded"):
        greedy(engine, "a")


def test_an_adapter_on_an_unknown_layer_is_rejected_and_nothing_changes(engine: InferenceEngine) -> None:
    with pytest.raises(AdapterError, match="not a linear layer"):
        engine.load_adapter("a", {"model.nowhere": (torch.zeros(2, 4), torch.zeros(4, 2))}, scale=1.0, version="v")
    assert "a" not in engine.adapters


def test_an_adapter_of_the_wrong_shape_is_rejected(engine: InferenceEngine) -> None:
    name, (a, b) = next(iter(adapter_weights(engine, 1).items()))
    with pytest.raises(AdapterError, match="do not fit"):
        engine.load_adapter("a", {name: (a, b[:-1])}, scale=1.0, version="v")


def test_an_adapter_of_rank_zero_is_rejected(engine: InferenceEngine) -> None:
    name, (a, b) = next(iter(adapter_weights(engine, 1).items()))
    with pytest.raises(AdapterError, match="do not fit"):
        engine.load_adapter("a", {name: (a[:0], b[:, :0])}, scale=1.0, version="v")


def test_an_adapter_cannot_take_the_base_model_name(engine: InferenceEngine) -> None:
    with pytest.raises(AdapterError, match="other than the base model"):
        engine.load_adapter(engine.model_name, adapter_weights(engine, 1), scale=1.0, version="v")


def test_a_peft_folder_is_read_with_its_scale(engine: InferenceEngine, tmp_path: Path) -> None:
    peft = pytest.importorskip("peft")

    model = peft.get_peft_model(
        copy.deepcopy(engine.model),
        peft.LoraConfig(r=4, lora_alpha=16, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"),
    )
    model.save_pretrained(str(tmp_path))
    weights, scale = read_peft_adapter(tmp_path)
    assert scale == 4.0
    assert {name.rsplit(".", 1)[-1] for name in weights} == {"q_proj", "v_proj"}
    engine.load_adapter("folder", tmp_path, version="v1")
    assert engine.adapters.version("folder") == "v1"


def test_the_server_serves_adapters_by_model_name(engine: InferenceEngine, tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from agentlightning.inference.server import create_inference_app

    client = TestClient(create_inference_app(engine))
    engine.load_adapter("solver", adapter_weights(engine, 1), scale=2.0, version="v1")
    models = [entry["id"] for entry in client.get("/v1/models").json()["data"]]
    assert models == [engine.model_name, "solver"]

    def complete(model: str) -> Any:
        body = {"model": model, "prompt": PROMPT, "max_tokens": 8, "temperature": 0}
        return client.post("/v1/completions", json=body)

    assert complete("solver").json()["choices"][0]["text"] != complete(engine.model_name).json()["choices"][0]["text"]
    missing = complete("reviewer")
    assert missing.status_code == 404 and "reviewer" in missing.json()["error"]["message"]
    assert client.post("/v1/unload_lora_adapter", json={"lora_name": "solver"}).status_code == 200
    assert complete("solver").status_code == 404


def test_the_server_loads_a_peft_folder_at_runtime(engine: InferenceEngine, tmp_path: Path) -> None:
    peft = pytest.importorskip("peft")

    from fastapi.testclient import TestClient

    from agentlightning.inference.server import create_inference_app

    model = peft.get_peft_model(
        copy.deepcopy(engine.model), peft.LoraConfig(r=2, target_modules=["q_proj"], task_type="CAUSAL_LM")
    )
    model.save_pretrained(str(tmp_path))
    client = TestClient(create_inference_app(engine))
    loaded = client.post("/v1/load_lora_adapter", json={"lora_name": "r1", "lora_path": str(tmp_path)})
    assert loaded.status_code == 200 and "r1" in engine.adapters
    refused = client.post("/v1/load_lora_adapter", json={"lora_name": "r2", "lora_path": str(tmp_path / "nowhere")})
    assert refused.status_code == 400 and "not a PEFT LoRA adapter folder" in refused.json()["error"]["message"]
