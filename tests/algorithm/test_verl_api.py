"""The verl API our VERL integration calls (scripts/verl_api.json) is current and exists in the release we target.

The release check reads verl's sources (an installed verl, found without importing it, or a wheel cached by
`python scripts/verl_api.py --download`) and needs no GPU; it is skipped when neither is here. The checker itself is
tested on small verl-shaped source trees, so a missing name or a changed signature is known to fail it.
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests._scripts import load_script

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "verl_api.py"


api = load_script(SCRIPT, "scripts_verl_api")


def test_the_checked_in_list_is_what_our_verl_code_calls() -> None:
    manifest = json.loads(api.MANIFEST.read_text())
    extracted = api.extract()
    stale = [part for part in ("imports", "members", "config") if manifest[part] != extracted[part]]
    assert not stale, f"scripts/verl_api.json is stale ({stale}): run python scripts/verl_api.py --write"


def _targeted_verl() -> Path:
    explicit = os.environ.get("AGL_VERL_WHEEL")
    location = Path(explicit) if explicit else api.installed_location() or api.cached_wheel()
    if location is None:
        pytest.skip("verl is neither installed nor cached: python scripts/verl_api.py --download (no GPU needed)")
    return location


def test_every_verl_name_signature_and_config_key_we_use_exists_in_the_targeted_release() -> None:
    from packaging.specifiers import SpecifierSet

    sources = api.Sources(_targeted_verl())
    assert sources.version in SpecifierSet(api.REQUIREMENT.removeprefix("verl")), sources.version
    report = api.check(sources, json.loads(api.MANIFEST.read_text()))
    assert report.checked > 50
    assert report.problems == []


# ---------------------------------------------------------------------------------------------- the checker itself
FAKE = {
    "verl/__init__.py": "from .protocol import Proto\n",
    "verl/protocol.py": """
        from dataclasses import dataclass, field

        @dataclass
        class Proto:
            batch: dict = None
            meta_info: dict = field(default_factory=dict)

            def union(self, other):
                return self

        def pad(data, size_divisor: int, *, mode="edge"):
            return data
    """,
    "verl/utils/__init__.py": "from .timing import *\n",
    "verl/utils/timing.py": """
        __all__ = ["timer"]

        def timer(name, timing_raw, *args, **kwargs):
            pass
    """,
    "verl/trainer/base.py": """
        class Base:
            def __init__(self, config, tokenizer=None):
                self.config = config
                self.workers, self.manager = None, None

            def _update(self, batch):
                return batch
    """,
    "verl/trainer/config/_generated_ppo_trainer.yaml": "trainer:\n  total_epochs: 1\n",
    "verl/trainer/config/ppo_trainer.yaml": "trainer: {}\n",
}


def _tree(root: Path, changes: dict[str, str]) -> Path:
    for name, text in {**FAKE, **changes}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


MANIFEST: dict[str, Any] = {
    "imports": [
        {"module": "verl", "name": "Proto", "calls": [{"positional": 0, "keywords": ["batch"]}]},
        {"module": "verl.protocol", "name": "pad", "calls": [{"positional": 2, "keywords": ["mode"]}]},
        {"module": "verl.utils", "name": "timer", "calls": [{"positional": 2, "keywords": []}]},
    ],
    "members": [
        {"class": "verl.trainer.base.Base", "name": "_update", "calls": [{"positional": 1, "keywords": []}]},
        {"class": "verl.trainer.base.Base", "name": "manager"},
        {"class": "verl.protocol.Proto", "name": "union", "calls": [{"positional": 1, "keywords": []}]},
    ],
    "config": {"required": ["trainer.total_epochs"], "optional": ["trainer.maybe"]},
    "manual": {"config_defaults": ["ppo_trainer"]},
}


def _problems(tmp_path: Path, changes: dict[str, str]) -> list[str]:
    return api.check(api.Sources(_tree(tmp_path, changes)), MANIFEST).problems


def test_a_release_that_has_everything_passes_re_exports_and_star_imports_followed(tmp_path: Path) -> None:
    assert _problems(tmp_path, {}) == []


def test_a_function_that_is_gone_is_reported(tmp_path: Path) -> None:
    problems = _problems(tmp_path, {"verl/utils/timing.py": "__all__ = []\n"})
    assert problems == ["verl.utils.timer: not defined in verl unknown"]


def test_a_renamed_keyword_is_reported(tmp_path: Path) -> None:
    text = FAKE["verl/protocol.py"].replace('*, mode="edge"', '*, padding="edge"')
    (problem,) = _problems(tmp_path, {"verl/protocol.py": text})
    assert "verl.protocol.pad called with" in problem and "keyword(s) ['mode'] it does not take" in problem


def test_a_new_required_parameter_is_reported(tmp_path: Path) -> None:
    text = FAKE["verl/protocol.py"].replace("def union(self, other):", "def union(self, other, strict):")
    (problem,) = _problems(tmp_path, {"verl/protocol.py": text})
    assert "verl.protocol.Proto.union" in problem and "required parameter(s) ['strict'] left out" in problem


def test_too_many_positional_arguments_are_reported(tmp_path: Path) -> None:
    text = FAKE["verl/protocol.py"].replace("def pad(data, size_divisor: int,", "def pad(data,")
    (problem,) = _problems(tmp_path, {"verl/protocol.py": text})
    assert "2 positional arguments, it takes 1" in problem


def test_a_member_the_base_class_no_longer_sets_is_reported(tmp_path: Path) -> None:
    text = FAKE["verl/trainer/base.py"].replace("self.workers, self.manager = None, None", "self.workers = None")
    assert _problems(tmp_path, {"verl/trainer/base.py": text}) == [
        "verl.trainer.base.Base.manager: no such member in verl unknown (nor in its verl bases)"
    ]


def test_a_dataclass_field_that_is_gone_is_a_keyword_the_constructor_does_not_take(tmp_path: Path) -> None:
    text = FAKE["verl/protocol.py"].replace("batch: dict = None", "payload: dict = None")
    (problem,) = _problems(tmp_path, {"verl/protocol.py": text})
    assert "verl.Proto called with" in problem and "keyword(s) ['batch']" in problem


def test_a_configuration_key_read_without_a_default_must_exist(tmp_path: Path) -> None:
    problems = _problems(tmp_path, {"verl/trainer/config/_generated_ppo_trainer.yaml": "trainer:\n  epochs: 1\n"})
    assert problems == ["configuration key trainer.total_epochs: read without a default, absent from verl's config"]


def test_a_missing_base_configuration_is_reported(tmp_path: Path) -> None:
    root = _tree(tmp_path, {})
    (root / "verl/trainer/config/ppo_trainer.yaml").unlink()
    assert api.check(api.Sources(root), MANIFEST).problems == [
        "config.yaml's defaults: verl has no trainer config 'ppo_trainer'"
    ]


def test_extraction_sees_imports_calls_base_class_members_and_config_keys(tmp_path: Path) -> None:
    (tmp_path / "trainer.py").write_text(
        textwrap.dedent(
            """
            from verl.protocol import pad
            from verl.trainer.base import Base

            class Ours(Base):
                def __init__(self, *args, **kwargs):
                    super().__init__(*args, **kwargs)
                    self.mine = 1

                def step(self, batch):
                    rollout = self.config.actor.rollout
                    pad(batch, rollout.n, mode="edge")
                    self._update(batch)
                    return self.mine, self.manager, self.config.data.get("seed")
            """
        )
    )
    extracted = api.extract(tmp_path)
    assert extracted["imports"] == [
        {"module": "verl.protocol", "name": "pad", "calls": [{"positional": 2, "keywords": ["mode"]}]},
        {"module": "verl.trainer.base", "name": "Base"},
    ]
    assert {m["name"] for m in extracted["members"]} == {"_update", "config", "manager"}
    assert extracted["config"] == {
        "required": ["actor.rollout", "actor.rollout.n", "data"],
        "optional": ["data.seed"],
    }
