"""VERL's public entry points on a machine without the `verl` extra: clear messages, light imports."""

from __future__ import annotations

import subprocess
import sys

import pytest

import agentlightning as agl
from agentlightning.algorithm.verl.dataset import LoadedDataset, collate_samples
from agentlightning.algorithm.verl.entrypoint import check_store_reachable, proxy_settings
from agentlightning.algorithm.verl.interface import require_verl
from agentlightning.llm_proxy import LLMProxy
from agentlightning.store.memory.store import InMemoryLightningStore

verl_installed = True
try:
    require_verl()
except ImportError:
    verl_installed = False


@pytest.mark.skipif(verl_installed, reason="the verl extra is installed here")
def test_without_the_extra_construction_says_how_to_install_it() -> None:
    with pytest.raises(ImportError, match=r"pip install 'agentlightning\[verl\]'.*Missing: verl"):
        agl.algorithm.VERL({"data": {"train_batch_size": 4}})


def test_config_must_be_a_mapping() -> None:
    with pytest.raises(TypeError, match="dict of VERL settings"):
        agl.algorithm.VERL("config.yaml")  # type: ignore[arg-type]


def test_the_trainer_needs_a_store_ray_actors_can_reach() -> None:
    with pytest.raises(ValueError, match=r"reach over HTTP.*InMemoryLightningStore"):
        check_store_reachable(InMemoryLightningStore())


def test_a_proxy_is_handed_to_the_actor_as_settings() -> None:
    proxy = LLMProxy(port=4321, api_key="k", request_timeout=30.0, store=InMemoryLightningStore())
    assert proxy_settings(proxy) == {
        "port": 4321,
        "host": "127.0.0.1",
        "bind_host": "127.0.0.1",
        "api_key": "k",
        "insecure": False,
        "num_retries": 3,
        "request_timeout": 30.0,
    }
    assert proxy_settings(None) is None


def test_datasets_are_batched_as_object_columns() -> None:
    dataset = LoadedDataset([{"q": "1+1", "a": 2}, {"q": "2+2"}, "raw"])
    columns = collate_samples([dataset[0], dataset[1], dataset[2]])
    assert {name: list(values) for name, values in columns.items()} == {
        "q": ["1+1", "2+2", None],
        "a": [2, None, None],
        "input": [None, None, "raw"],
    }
    assert all(values.dtype == object for values in columns.values())


def test_importing_the_package_loads_neither_verl_nor_ray_nor_torch() -> None:
    code = (
        "import sys, agentlightning.algorithm.verl as v; "
        "print(','.join(m for m in ('verl', 'ray', 'torch', 'hydra') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""


def _config(**data: object) -> object:
    from types import SimpleNamespace

    class Section(dict):  # the OmegaConf mapping API the check uses: .get and attributes
        __getattr__ = dict.__getitem__

    return SimpleNamespace(data=Section({"train_batch_size": 2, **data}))


def test_datasets_too_small_for_verl_are_refused_before_ray_starts() -> None:
    from agentlightning.algorithm.verl.interface import check_datasets

    check_datasets(_config(), [1, 2, 3], [4])
    with pytest.raises(ValueError, match="fewer than one batch"):
        check_datasets(_config(), [1], [4])
    with pytest.raises(ValueError, match="validation tasks"):
        check_datasets(_config(), [1, 2], None)
    with pytest.raises(ValueError, match="validation dataset is empty"):
        check_datasets(_config(), [1, 2], [])
    with pytest.raises(ValueError, match=r"train_dataset or set data\.train_files"):
        check_datasets(_config(), None, [4])
    check_datasets(_config(train_files="train.parquet", val_files="val.parquet"), None, None)


needs_verl = pytest.mark.skipif(not verl_installed, reason="needs the verl extra")


@needs_verl
def test_the_packaged_config_extends_verls_ppo_trainer_defaults() -> None:
    from agentlightning.algorithm.verl import compose_config

    config = compose_config(
        {"data": {"train_batch_size": 4}, "agentlightning": {"trace_aggregator": {"level": "trajectory"}}}
    )
    assert config.data.train_batch_size == 4
    assert config.data.filter_overlong_prompts is False
    assert config.actor_rollout_ref.rollout.mode == "async"
    assert config.agentlightning.trace_aggregator.level == "trajectory"
    assert config.agentlightning.trace_aggregator.trajectory_max_response_length == 8192
    assert "adv_estimator" in config.algorithm  # VERL's own defaults are there
    with pytest.raises(ValueError, match=r"trace_aggregator\.level"):
        compose_config({"agentlightning": {"trace_aggregator": {"level": "episode"}}})


@needs_verl
def test_a_batch_becomes_a_verl_data_proto() -> None:
    from agentlightning.algorithm.verl.batch import RolloutTrace, build_batch
    from agentlightning.types import Triplet

    triplet = Triplet(prompt={"token_ids": [1, 2]}, response={"token_ids": [3]}, reward=1.0)
    batch = build_batch(
        [RolloutTrace("r1", "d1", [triplet])], max_prompt_length=2, max_response_length=2, pad_token_id=0
    )
    proto = batch.to_data_proto()
    assert len(proto) == 1
    assert proto.batch["input_ids"].tolist() == [[1, 2, 3, 0]]
    assert list(proto.non_tensor_batch["uid"]) == ["d1"]
