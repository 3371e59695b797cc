"""The component builder: instances, classes, factories, import strings and dicts with `type`."""

from __future__ import annotations

import pytest

from agentlightning.trainer.init_utils import build_component, instantiate_component, instantiate_from_spec, load_class

from .sample_components import OnlyKwargs, Plain, Sub


def test_load_class_accepts_dotted_and_colon_paths() -> None:
    assert load_class("tests.trainer.sample_components.Plain") is Plain
    assert load_class("tests.trainer.sample_components:Plain") is Plain


@pytest.mark.parametrize("path", ["nope", "tests.trainer.sample_components.Missing", "no_such_module.X"])
def test_load_class_names_what_could_not_be_found(path: str) -> None:
    with pytest.raises(ValueError, match=r"Cannot import|has no attribute|import path"):
        load_class(path)


def test_optional_defaults_fill_only_named_unset_parameters() -> None:
    made = instantiate_component(Plain, {"a": 5}, {"a": 9, "b": "y", "c": 1})
    assert (made.a, made.b) == (5, "y")
    called: list[int] = []
    made = instantiate_component(Plain, {"b": "given"}, {"b": lambda: called.append(1) or "z"})
    assert made.b == "given" and called == []
    assert instantiate_component(OnlyKwargs, None, {"a": 1}).kwargs == {}


def test_specs_from_strings_and_dicts() -> None:
    assert isinstance(instantiate_from_spec("tests.trainer.sample_components.Plain", spec_name="x"), Plain)
    made = instantiate_from_spec({"type": "tests.trainer.sample_components.Plain", "a": 3}, spec_name="x")
    assert made.a == 3
    made = instantiate_from_spec({"a": 4}, spec_name="x", dict_requires_type=False, dict_default_cls=Plain)
    assert made.a == 4
    with pytest.raises(ValueError, match="must have a 'type' key"):
        instantiate_from_spec({"a": 4}, spec_name="x")
    with pytest.raises(TypeError, match="string or dict"):
        instantiate_from_spec(3, spec_name="x")  # type: ignore[arg-type]


def test_registry_aliases_and_names() -> None:
    registry = {"plain": "tests.trainer.sample_components.Plain"}
    assert isinstance(build_component("plain", expected_type=Plain, spec_name="x", registry=registry), Plain)
    made = build_component({"name": "plain", "a": 2}, expected_type=Plain, spec_name="x", registry=registry)
    assert made is not None and made.a == 2
    with pytest.raises(ValueError, match="Known names: plain"):
        build_component("other", expected_type=Plain, spec_name="x", registry=registry)


def test_build_component_resolution_order() -> None:
    instance = Plain()
    assert build_component(instance, expected_type=Plain, spec_name="x") is instance
    assert isinstance(build_component(Sub, expected_type=Plain, spec_name="x"), Sub)
    assert build_component(lambda: Plain(a=7), expected_type=Plain, spec_name="x").a == 7  # type: ignore[union-attr]
    assert build_component(None, expected_type=Plain, spec_name="x", allow_none=True) is None
    assert build_component(None, expected_type=Plain, spec_name="x", default_factory=Plain) is not None
    with pytest.raises(ValueError, match="`x` cannot be None"):
        build_component(None, expected_type=Plain, spec_name="x")
    with pytest.raises(ValueError, match="Invalid `x` type"):
        build_component(OnlyKwargs, expected_type=Plain, spec_name="x")
    with pytest.raises(TypeError, match="`x` factory returned OnlyKwargs"):
        build_component(lambda: OnlyKwargs(), expected_type=Plain, spec_name="x")
    with pytest.raises(TypeError, match="custom int Plain"):
        build_component(
            lambda: 3, expected_type=Plain, spec_name="x", type_error_fmt="custom {type_name} {expected_type}"
        )
