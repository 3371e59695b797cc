"""Passing a contract call on to another store: only the arguments the caller gave.

A wrapper (`DelegatingStore` subclass) receives every parameter of an operation by name, defaults included. It
passes on only those that differ from the contract's default, so a store written against an older signature (a 0.2
store without `worker_id`, say) keeps working behind a wrapper, and the wrapped store's own defaults apply.
Parameters without a default travel positionally, as callers of 0.2 stores did.
"""

from __future__ import annotations

import inspect
from functools import cache
from typing import Any

from agentlightning.store.base import LightningStore

__all__ = ["call_store", "given_arguments"]

_SCALAR_DEFAULT_TYPES = (str, int, float, bool)


@cache
def _parameters(operation: str) -> tuple[inspect.Parameter, ...]:
    method = getattr(LightningStore, operation, None)
    if method is None or not inspect.iscoroutinefunction(method):
        raise AttributeError(f"LightningStore has no operation {operation!r}")
    return tuple(inspect.signature(method).parameters.values())[1:]  # without self


def _is_default(value: Any, default: Any) -> bool:
    if value is default:
        return True
    return isinstance(default, _SCALAR_DEFAULT_TYPES) and type(value) is type(default) and value == default


def given_arguments(operation: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """`arguments` without those equal to the contract's default for `operation`."""
    given: dict[str, Any] = {}
    for parameter in _parameters(operation):
        value = arguments[parameter.name]
        if parameter.default is inspect.Parameter.empty or not _is_default(value, parameter.default):
            given[parameter.name] = value
    return given


async def call_store(store: LightningStore, operation: str, arguments: dict[str, Any]) -> Any:
    """Run `store.<operation>` with the given arguments: required ones positionally, the rest by name."""
    given = given_arguments(operation, arguments)
    positional: list[Any] = []
    named: dict[str, Any] = {}
    for parameter in _parameters(operation):
        if parameter.name not in given:
            continue
        required = parameter.default is inspect.Parameter.empty
        if required and parameter.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD:
            positional.append(given[parameter.name])
        else:
            named[parameter.name] = given[parameter.name]
    return await getattr(store, operation)(*positional, **named)
