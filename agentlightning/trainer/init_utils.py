"""Building the trainer's components from what the user passed: an instance, a class, a factory, an import string,
or a dict with a `type` key (the other keys are constructor arguments).

`build_component` resolves one spec in this order: an instance of the expected type is used as is; None gives the
default (or None when allowed); a subclass is instantiated (with the optional defaults its constructor accepts); a
plain callable is called; a string or dict is loaded by import path (or registry alias). Every product is
type-checked, and every failure names the component and what was wrong.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from typing import Any, Optional, TypeVar, Union

__all__ = [
    "ComponentSpec",
    "build_component",
    "instantiate_component",
    "instantiate_from_spec",
    "load_class",
]

T = TypeVar("T")

ComponentSpec = Union[T, type[T], Callable[[], T], str, dict[str, Any], None]


def load_class(path: str) -> type[Any]:
    """Import `package.module.Class` (also accepts `package.module:Class`).

    Raises:
        ValueError: the path is malformed, or the module or attribute does not exist.
    """
    if not isinstance(path, str) or not path.strip():
        raise ValueError(f"Expected an import path like 'package.module.Class', got {path!r}")
    if ":" in path:
        module_name, _, attribute = path.partition(":")
    else:
        module_name, _, attribute = path.rpartition(".")
    if not module_name or not attribute:
        raise ValueError(f"Expected an import path like 'package.module.Class', got {path!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"Cannot import {module_name!r} (from {path!r}): {exc}") from exc
    target: Any = module
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ValueError(f"{module_name!r} has no attribute {attribute!r} (from {path!r})") from None
    return target


def _accepted_parameters(cls: type[Any]) -> Optional[set[str]]:
    """Named parameters of the constructor (None when it takes only `*args/**kwargs` or cannot be inspected)."""
    try:
        signature = inspect.signature(cls)
    except (TypeError, ValueError):
        return None
    names = {
        name
        for name, parameter in signature.parameters.items()
        if parameter.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    }
    return names


def instantiate_component(
    cls: type[T],
    provided_kwargs: Optional[Mapping[str, Any]] = None,
    optional_defaults: Optional[Mapping[str, Any]] = None,
) -> T:
    """`cls(**provided_kwargs)` plus each optional default the constructor names and the caller did not provide.

    A callable optional default is called to produce the value (only when it is used).
    """
    kwargs = dict(provided_kwargs or {})
    accepted = _accepted_parameters(cls) or set()
    for name, default in (optional_defaults or {}).items():
        if name in kwargs or name not in accepted:
            continue
        kwargs[name] = default() if callable(default) and not inspect.isclass(default) else default
    return cls(**kwargs)


def instantiate_from_spec(
    spec: Union[str, Mapping[str, Any]],
    *,
    spec_name: str,
    optional_defaults: Optional[Mapping[str, Any]] = None,
    dict_requires_type: bool = True,
    dict_default_cls: Optional[type[Any]] = None,
    registry: Optional[Mapping[str, str]] = None,
) -> Any:
    """Instantiate a string spec (registry alias or import path) or a dict spec (`type` + constructor kwargs).

    Raises:
        ValueError: a dict without a usable `type`; an unknown alias or import path.
        TypeError: the spec is neither a string nor a dict.
    """
    if isinstance(spec, str):
        path = registry.get(spec, spec) if registry else spec
        return instantiate_component(_load(path, spec_name, registry), optional_defaults=optional_defaults)
    if isinstance(spec, Mapping):
        kwargs = dict(spec)
        type_spec = kwargs.pop("type", None)
        if type_spec is None and registry and "name" in kwargs:
            type_spec = kwargs.pop("name")
        if type_spec is None:
            if dict_requires_type or dict_default_cls is None:
                raise ValueError(f"`{spec_name}` dict must have a 'type' key (a class, import path or alias): {spec!r}")
            cls: type[Any] = dict_default_cls
        elif isinstance(type_spec, str):
            cls = _load(registry.get(type_spec, type_spec) if registry else type_spec, spec_name, registry)
        elif inspect.isclass(type_spec):
            cls = type_spec
        else:
            raise ValueError(f"`{spec_name}` 'type' must be a class or an import path, got {type_spec!r}")
        return instantiate_component(cls, kwargs, optional_defaults)
    raise TypeError(f"`{spec_name}` spec must be a string or dict, got {type(spec).__name__}")


def _load(path: str, spec_name: str, registry: Optional[Mapping[str, str]]) -> type[Any]:
    try:
        return load_class(path)
    except ValueError as exc:
        aliases = f" Known names: {', '.join(sorted(registry))}." if registry else ""
        raise ValueError(f"Unknown `{spec_name}` {path!r}: {exc}.{aliases}") from exc


def build_component(
    spec: Any,
    *,
    expected_type: type[T],
    spec_name: str,
    default_factory: Optional[Callable[[], T]] = None,
    allow_none: bool = False,
    optional_defaults: Optional[Mapping[str, Any]] = None,
    dict_requires_type: bool = True,
    dict_default_cls: Optional[type[Any]] = None,
    type_error_fmt: Optional[str] = None,
    invalid_spec_error_fmt: Optional[str] = None,
    registry: Optional[Mapping[str, str]] = None,
) -> Optional[T]:
    """Resolve `spec` into an instance of `expected_type` (see the module docstring for the order).

    Raises:
        ValueError: None without a default (and not allowed), an unrelated class or value, a bad string/dict spec.
        TypeError: the produced object is not an `expected_type`.
    """

    def checked(value: Any) -> T:
        if isinstance(value, expected_type):
            return value
        if type_error_fmt is not None:
            raise TypeError(type_error_fmt.format(type_name=type(value).__name__, expected_type=expected_type.__name__))
        raise TypeError(
            f"`{spec_name}` factory returned {type(value).__name__}, which is not a `{expected_type.__name__}` "
            "subclass."
        )

    def invalid() -> ValueError:
        if invalid_spec_error_fmt is not None:
            return ValueError(
                invalid_spec_error_fmt.format(actual_type=type(spec).__name__, expected_type=expected_type.__name__)
            )
        return ValueError(
            f"Invalid `{spec_name}` type: {type(spec).__name__} ({spec!r}); expected a {expected_type.__name__} "
            "instance, class, factory, import string or dict with 'type'."
        )

    if isinstance(spec, expected_type):
        return spec
    if spec is None:
        if default_factory is not None:
            return checked(default_factory())
        if allow_none:
            return None
        if invalid_spec_error_fmt is not None:
            raise invalid()
        raise ValueError(f"`{spec_name}` cannot be None.")
    if inspect.isclass(spec):
        if issubclass(spec, expected_type):
            return checked(instantiate_component(spec, optional_defaults=optional_defaults))
        raise invalid()
    if callable(spec) and not isinstance(spec, (str, dict)):
        return checked(spec())
    if isinstance(spec, (str, dict)):
        return checked(
            instantiate_from_spec(
                spec,
                spec_name=spec_name,
                optional_defaults=optional_defaults,
                dict_requires_type=dict_requires_type,
                dict_default_cls=dict_default_cls,
                registry=registry,
            )
        )
    raise invalid()
