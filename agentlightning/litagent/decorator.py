"""Functional agents: turn a plain function into a `LitAgent` with `@rollout`, `@llm_rollout` or `@prompt_rollout`.

The function's parameters say what it needs, by name: `task` first, then `llm` (the first `LLM` resource) or
`prompt_template` (the first `PromptTemplate` resource), and optionally `rollout` (the rollout being run). With
`@rollout`, an agent that needs no resource takes `task` alone (or `task, rollout`)::

    @agl.rollout
    async def agent(task, llm, rollout):
        ...

The decorated object is still callable like the original function.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import logging
import sys
from collections.abc import Callable
from typing import Any, Optional, Union, overload

from agentlightning.types import LLM, AttemptedRollout, NamedResources, PromptTemplate, ProxyLLM, Rollout

from .litagent import LitAgent

__all__ = ["FunctionalLitAgent", "llm_rollout", "prompt_rollout", "rollout"]

logger = logging.getLogger(__name__)

AgentFunction = Callable[..., Any]

_ACCEPTED_SIGNATURES = (
    "[async] def agent(task, llm[, rollout])  or  [async] def agent(task, prompt_template[, rollout])  or  "
    "[async] def agent(task[, rollout])"
)


def _first_resource(resources: NamedResources, kind: type, what: str, agent_name: str) -> Any:
    found = [(name, value) for name, value in resources.items() if isinstance(value, kind)]
    if not found and not resources:
        raise ValueError(
            f"Agent {agent_name} needs a {what} resource, but the rollout has no resources at all: nothing was "
            f"published to the store. Trainer(initial_resources=...) only hands resources to the algorithm; Baseline, "
            f"APO and GRPO publish them, an @agl.algo function must publish them itself (take an `initial_resources` "
            f"and a `store` parameter and call `await store.add_resources(initial_resources)`)"
        )
    if not found:
        raise ValueError(
            f"Agent {agent_name} needs a {what} resource, but the rollout's resources have none "
            f"(names: {sorted(resources)}); add a {kind.__name__} to the resources the algorithm publishes"
        )
    if len(found) > 1:
        logger.warning(
            "Agent %s: several %s resources (%s); using %r", agent_name, what, [n for n, _ in found], found[0][0]
        )
    return found[0][1]


def _load_by_name(module: str, qualname: str) -> Any:
    target: Any = importlib.import_module(module)
    for part in qualname.split("."):
        target = getattr(target, part)
    return target


class FunctionalLitAgent(LitAgent[Any]):
    """A LitAgent around a function; resources are passed to it by parameter name (see the module docstring).

    Args:
        rollout_func: the function (sync or async).
        strip_proxy: give the function a plain `LLM` bound to the current attempt instead of a `ProxyLLM`.
    """

    def __init__(self, rollout_func: Callable[..., Any], *, strip_proxy: bool = True) -> None:
        super().__init__()
        self._rollout_func = rollout_func
        self._strip_proxy = strip_proxy
        self._is_async = inspect.iscoroutinefunction(rollout_func)
        self._sig = inspect.signature(rollout_func)
        functools.update_wrapper(self, rollout_func)  # type: ignore[arg-type]

    def __reduce_ex__(self, protocol: Any) -> Any:
        # `@rollout` replaces the module-level function by this object, so the function itself cannot be pickled by
        # reference; pickle the decorated object by reference instead (runner processes re-import the module).
        module = getattr(self._rollout_func, "__module__", None)
        qualname = getattr(self._rollout_func, "__qualname__", "")
        if module and "<locals>" not in qualname and module in sys.modules:
            try:
                if _load_by_name(module, qualname) is self:
                    return (_load_by_name, (module, qualname))
            except AttributeError:
                pass
        return super().__reduce_ex__(protocol)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._rollout_func(*args, **kwargs)

    def is_async(self) -> bool:
        return self._is_async

    @property
    def _name(self) -> str:
        return getattr(self._rollout_func, "__qualname__", repr(self._rollout_func))

    def _kwargs(self, resources: NamedResources, rollout: Rollout) -> dict[str, Any]:
        params = self._sig.parameters
        kwargs: dict[str, Any] = {}
        if "rollout" in params:
            kwargs["rollout"] = rollout
        if "llm" in params:
            llm = _first_resource(resources, LLM, "LLM", self._name)
            if self._strip_proxy and isinstance(llm, ProxyLLM):
                if not isinstance(rollout, AttemptedRollout):
                    raise ValueError(
                        f"Agent {self._name} got a ProxyLLM, which needs an attempted rollout to build its URL, but "
                        f"the rollout {rollout.rollout_id} has no attempt"
                    )
                llm = llm.with_attempted_rollout(rollout)
            kwargs["llm"] = llm
        if "prompt_template" in params:
            kwargs["prompt_template"] = _first_resource(resources, PromptTemplate, "PromptTemplate", self._name)
        return kwargs

    def rollout(self, task: Any, resources: NamedResources, rollout: Rollout) -> Any:
        if self._is_async:
            raise RuntimeError(f"Agent {self._name} is async; the runner must call rollout_async")
        return self._rollout_func(task, **self._kwargs(resources, rollout))

    async def rollout_async(self, task: Any, resources: NamedResources, rollout: Rollout) -> Any:
        if not self._is_async:
            raise RuntimeError(f"Agent {self._name} is sync; the runner must call rollout")
        return await self._rollout_func(task, **self._kwargs(resources, rollout))


def _check_signature(func: Callable[..., Any], resource_param: str) -> None:
    """ValueError unless `func` takes `task` first and a parameter named `resource_param`."""
    params = list(inspect.signature(func).parameters)
    name = getattr(func, "__qualname__", repr(func))
    if len(params) < 2:
        raise ValueError(f"{name} must take at least two parameters (task, {resource_param}); it takes {params}")
    if params[0] != "task":
        raise ValueError(f"The first parameter of {name} must be named 'task', got {params[0]!r}")
    if resource_param not in params:
        raise ValueError(f"{name} must have a parameter named {resource_param!r}; it has {params}")


@overload
def llm_rollout(func: AgentFunction) -> FunctionalLitAgent: ...


@overload
def llm_rollout(*, strip_proxy: bool = True) -> Callable[[AgentFunction], FunctionalLitAgent]: ...


def llm_rollout(
    func: Optional[AgentFunction] = None, *, strip_proxy: bool = True
) -> Union[FunctionalLitAgent, Callable[[AgentFunction], FunctionalLitAgent]]:
    """Decorate `[async] def agent(task, llm[, rollout])`; usable as `@llm_rollout` or `@llm_rollout(...)`."""

    def decorate(fn: AgentFunction) -> FunctionalLitAgent:
        _check_signature(fn, "llm")
        return FunctionalLitAgent(fn, strip_proxy=strip_proxy)

    return decorate(func) if func is not None else decorate


@overload
def prompt_rollout(func: AgentFunction) -> FunctionalLitAgent: ...


@overload
def prompt_rollout() -> Callable[[AgentFunction], FunctionalLitAgent]: ...


def prompt_rollout(
    func: Optional[AgentFunction] = None,
) -> Union[FunctionalLitAgent, Callable[[AgentFunction], FunctionalLitAgent]]:
    """Decorate `[async] def agent(task, prompt_template[, rollout])`."""

    def decorate(fn: AgentFunction) -> FunctionalLitAgent:
        _check_signature(fn, "prompt_template")
        return FunctionalLitAgent(fn)

    return decorate(func) if func is not None else decorate


def _takes_no_resource(func: Callable[..., Any]) -> bool:
    """`func` is `(task)` or `(task, rollout)`: an agent that needs no resource."""
    params = list(inspect.signature(func).parameters)
    return params in (["task"], ["task", "rollout"])


def rollout(func: Callable[..., Any]) -> FunctionalLitAgent:
    """Decorate an agent function whose signature names what it needs (an LLM, a prompt template, or nothing but
    its task).

    Raises:
        NotImplementedError: the signature matches none of the accepted forms.
    """
    for resource_param in ("llm", "prompt_template"):
        try:
            _check_signature(func, resource_param)
        except ValueError:
            continue
        return FunctionalLitAgent(func)
    if _takes_no_resource(func):
        return FunctionalLitAgent(func)
    name = getattr(func, "__qualname__", repr(func))
    params = list(inspect.signature(func).parameters)
    raise NotImplementedError(f"@rollout does not support the signature of {name} {params}; use {_ACCEPTED_SIGNATURES}")
