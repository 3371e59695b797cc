"""What a GRPO run sets up around the training: published resources, seeds, the served weights, evaluations and
durable checkpoints."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import agentlightning as agl  # noqa: E402
from agentlightning.algorithm.grpo import GRPO  # noqa: E402
from agentlightning.algorithm.grpo.config import GRPOConfig  # noqa: E402
from agentlightning.algorithm.grpo.learning.checkpoint import save_checkpoint  # noqa: E402
from agentlightning.algorithm.grpo.learning.policy import Policy  # noqa: E402
from agentlightning.algorithm.grpo.reporting.evaluation import evaluation_report  # noqa: E402
from agentlightning.algorithm.grpo.rollouts.reading import RolloutData  # noqa: E402
from agentlightning.inference.server import InferenceServer  # noqa: E402
from agentlightning.inference.tiny import build_tiny_engine  # noqa: E402
from agentlightning.types import Rollout, Triplet  # noqa: E402

from .agents import cool_prompted_agent, digit_agent, modelless_agent  # noqa: E402

PROMPT = agl.PromptTemplate(template="Number {id}:", engine="f-string")


def test_initial_resources_are_published_with_the_model_and_mismatched_sampling_is_counted(tmp_path: Path) -> None:
    algorithm = GRPO(engine=build_tiny_engine(seed=0), group_size=2, tasks_per_step=1, max_steps=1, temperature=1.0)
    trainer = agl.Trainer(
        algorithm=algorithm, n_runners=1, strategy="shm", progress="off", initial_resources={"prompt": PROMPT}
    )
    trainer.fit(cool_prompted_agent, [{"id": 1}])
    (entry,) = algorithm.history
    assert entry["rollouts"] == 2 and entry["skips"]["rollouts_failed"] == 0  # every rollout found its prompt
    assert entry["sampling_mismatches"] == {"calls": 2, "temperature": 2, "top_p": 0, "top_k": 0}
    assert algorithm.sampling_mismatches.temperature == 2


def test_the_same_seed_gives_the_same_lora_initialisation_and_engine_sampling_stream() -> None:
    def build(seed: int) -> tuple[Any, list[Any]]:
        algorithm = GRPO(engine=build_tiny_engine(seed=0), lora_rank=4, seed=seed)
        torch.rand(7)  # whatever drew from torch's generator before
        algorithm._build()
        try:
            assert algorithm.policy is not None and algorithm.engine is not None
            lora = {k: v.clone() for k, v in algorithm.policy.model.state_dict().items() if "lora_A" in k}
            return lora, [algorithm.engine.draw_seed() for _ in range(3)]
        finally:
            algorithm._shutdown()

    (lora_a, seeds_a), (lora_b, seeds_b), (lora_c, seeds_c) = build(3), build(3), build(4)
    assert lora_a and all(torch.equal(lora_a[k], lora_b[k]) for k in lora_a)
    assert not all(torch.equal(lora_a[k], lora_c[k]) for k in lora_a)
    assert seeds_a == seeds_b != seeds_c and None not in seeds_a


def test_a_server_given_by_url_gets_the_initial_weights_before_anything_runs(tmp_path: Path) -> None:
    served = build_tiny_engine(seed=0)
    trained = build_tiny_engine(seed=1)  # the model folder GRPO trains holds other weights than the server's
    folder = tmp_path / "base"
    trained.model.save_pretrained(str(folder))
    trained.tokenizer.save_pretrained(str(folder))
    key = "model.layers.0.self_attn.q_proj.weight"
    loads: list[tuple[str, bool]] = []  # (version, whether the server then held the trained folder's weights)
    original = served.load_weights

    def recording(source: Any, version: str) -> None:
        original(source, version)
        loads.append((version, torch.equal(served.model.state_dict()[key], trained.model.state_dict()[key])))

    served.load_weights = recording  # type: ignore[method-assign]
    with InferenceServer(served) as server:
        algorithm = GRPO(
            model=folder,
            server_url=server.endpoint,
            output_dir=tmp_path / "run",
            group_size=2,
            tasks_per_step=1,
            max_steps=1,
        )
        trainer = agl.Trainer(algorithm=algorithm, n_runners=1, strategy="shm", progress="off")
        trainer.fit(digit_agent, [{"id": 1}], val_dataset=[{"id": 2}])
    assert loads[0] == ("base", True)  # before the "before" evaluation and the first step
    assert [e.label for e in algorithm.evaluations] == ["before", "after"]


def _finished(position: int, reward: float) -> RolloutData:
    rollout = Rollout(rollout_id=f"ro-{position}", input={"i": position}, start_time=0.0, status="succeeded")
    call = Triplet(prompt={"token_ids": [1]}, response={"token_ids": [2]})
    return RolloutData(rollout, reward, [call])


def test_an_evaluation_counts_tasks_whose_rollouts_did_not_finish() -> None:
    tasks = [{"i": i} for i in range(4)]
    report = evaluation_report("before", 0, tasks, [_finished(2, 1.0), _finished(0, 0.0)], [2, 0], None)
    assert [item["status"] for item in report.items] == ["succeeded", "unfinished", "succeeded", "unfinished"]
    assert [item["task"] for item in report.items] == tasks
    assert (report.unfinished, report.failed, report.without_reward) == (2, 0, 0)
    assert report.to_dict()["n"] == 4 and report.to_dict()["unfinished"] == 2


def test_checkpoint_files_reach_the_disk_before_the_checkpoint_is_renamed_into_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    policy = Policy.from_engine(build_tiny_engine(seed=0), GRPOConfig())
    synced: set[str] = set()
    synced_at_rename: list[set[str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        synced.add(os.path.realpath(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    def replace(src: Any, dst: Any) -> None:
        if Path(src).is_dir():
            synced_at_rename.append({path.replace(str(src), str(dst)) for path in synced})
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    target = save_checkpoint(tmp_path, policy, 1, {"history": []})
    (before_rename,) = synced_at_rename
    files = {os.path.realpath(p) for p in target.rglob("*")}
    assert files and files <= before_rename  # every file and folder of the checkpoint, before the rename
    assert os.path.realpath(tmp_path / "checkpoints") in synced  # and the folder holding it, after


def test_a_step_whose_rollouts_make_no_llm_call_at_all_stops_the_run() -> None:
    from agentlightning.algorithm import NoLLMCallsError

    algorithm = GRPO(engine=build_tiny_engine(seed=0), group_size=2, tasks_per_step=2, max_steps=3)
    trainer = agl.Trainer(algorithm=algorithm, n_runners=1, strategy="shm", progress="off")
    with pytest.raises(NoLLMCallsError, match="none of the 4 finished rollouts"):
        trainer.fit(modelless_agent, [{"id": 1}, {"id": 2}])
    assert algorithm.history == []


def test_the_proxy_address_and_key_runners_get_are_configurable() -> None:
    algorithm = GRPO(
        engine=build_tiny_engine(seed=0),
        group_size=2,
        tasks_per_step=1,
        max_steps=1,
        proxy={"bind_host": "127.0.0.1", "host": "localhost", "api_key": "proxy-key"},
    )
    trainer = agl.Trainer(algorithm=algorithm, n_runners=1, strategy="shm", progress="off")
    trainer.fit(digit_agent, [{"id": 1}])
    (entry,) = algorithm.history
    assert entry["rollouts"] == 2 and entry["skips"]["rollouts_failed"] == 0  # the runners dialled it with the key
    update = _run(trainer.store.get_resources_by_id("grpo-base"))
    llm = update.resources["main_llm"]
    assert llm.api_key == "proxy-key" and llm.get_base_url("ro", "at").startswith("http://localhost:")


def test_unknown_proxy_options_are_named() -> None:
    with pytest.raises(TypeError, match="bind_hots"):
        GRPO(proxy={"bind_hots": "0.0.0.0"})


def _run(coroutine: Any) -> Any:
    import asyncio

    return asyncio.run(coroutine)


def test_a_model_that_is_not_a_local_folder_is_refused_before_anything_loads() -> None:
    with pytest.raises(ValueError, match="not a local Hugging Face model folder"):
        GRPO(model="HuggingFaceTB/SmolLM2-135M-Instruct")
