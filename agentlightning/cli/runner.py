"""`agl runner`: run an agent on the rollouts of a store, from any machine that can reach it.

    agl runner --store http://trainer-host:4747 --agent my_package.agents:agent --n-runners 4

The store is a URL (`http(s)://` for a store server, or `sqlite:///...` / `postgresql://...` opened directly). The
agent is `module:object`: a LitAgent instance, a LitAgent subclass (instantiated without arguments), or a function
(decorated with `@agl.rollout` or not). With `--n-runners N > 1` the runners are separate processes. The runners
join a training already running and may leave at any time (Ctrl-C or SIGTERM stops them after recording their
attempts; each worker's last heartbeat says that it stopped).
"""

from __future__ import annotations

import argparse
import inspect
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Optional

__all__ = ["main"]

logger = logging.getLogger("agentlightning.cli.runner")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agl runner", description="Run an agent on the rollouts of a store.")
    parser.add_argument(
        "--store", required=True, help="store URL: http://host:port, sqlite:///file.db, postgresql://..."
    )
    parser.add_argument("--agent", required=True, help="the agent as module:object (LitAgent, class or function)")
    parser.add_argument("--n-runners", type=int, default=1, help="runner processes (default 1: in this process)")
    parser.add_argument("--tracer", default="otel", help="otel (default), dummy, agentops, or module:Class")
    parser.add_argument("--max-rollouts", type=int, default=None, help="each runner stops after this many rollouts")
    parser.add_argument("--poll-interval", type=float, default=1.0, help="longest wait between polls of an empty queue")
    parser.add_argument("--connect-timeout", type=float, default=60.0, help="seconds to wait for the store at start")
    parser.add_argument("--heartbeat-interval", type=float, default=10.0, help="seconds between heartbeats")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    return parser


def _fail(message: str, code: int = 2) -> int:
    print(f"agl runner: {message}", file=sys.stderr)
    return code


def load_agent(spec: str) -> Any:
    """The LitAgent named by `module:object` (instantiating a class, wrapping a plain function).

    Raises:
        ValueError: the spec is malformed, cannot be imported, or does not name an agent.
    """
    import agentlightning as agl
    from agentlightning.trainer.init_utils import load_class

    if ":" not in spec and "." not in spec:
        raise ValueError(f"--agent must be module:object, got {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # like `python -m`: modules of the current directory are importable
    target = load_class(spec)
    if isinstance(target, agl.LitAgent):
        return target
    if inspect.isclass(target) and issubclass(target, agl.LitAgent):
        return target()
    if callable(target):
        return agl.rollout(target)
    raise ValueError(f"{spec} is a {type(target).__name__}, not a LitAgent, a LitAgent class or a function")


def _tracer(name: str) -> Any:
    if name == "otel":
        from agentlightning.tracer.otel import OtelTracer

        return OtelTracer()
    if name == "dummy":
        from agentlightning.tracer.dummy import DummyTracer

        return DummyTracer()
    if name == "agentops":
        from agentlightning.tracer.agentops import AgentOpsTracer

        return AgentOpsTracer()
    from agentlightning.trainer.init_utils import load_class

    return load_class(name)()


def main(argv: Optional[list[str]] = None) -> int:
    args = _parser().parse_args(argv)
    from agentlightning.logging import setup

    setup(args.log_level.upper())
    if args.n_runners < 1:
        return _fail("--n-runners must be at least 1")
    if args.store.startswith("memory://"):
        return _fail("a runner cannot share an in-memory store; use http://, sqlite:// or postgresql://")
    try:
        agent = load_agent(args.agent)
    except (ValueError, NotImplementedError) as exc:
        return _fail(str(exc))
    from agentlightning.store.url import SCHEME_MODULES

    scheme = args.store.split("://", 1)[0].lower() if "://" in args.store else ""
    if scheme not in SCHEME_MODULES:
        return _fail(f"--store must be a store URL (http://, https://, sqlite:///, postgresql://), got {args.store!r}")
    try:
        tracer = _tracer(args.tracer)
    except (ValueError, ImportError) as exc:
        return _fail(f"--tracer {args.tracer!r}: {exc}")

    from agentlightning.runner import LitAgentRunner, StoreUnreachableError

    try:
        runner: LitAgentRunner[Any] = LitAgentRunner(
            tracer=tracer,
            max_rollouts=args.max_rollouts,
            poll_interval=args.poll_interval,
            heartbeat_interval=args.heartbeat_interval,
            connect_timeout=args.connect_timeout,
        )
    except ValueError as exc:
        return _fail(str(exc))
    try:
        with _sigterm_as_interrupt():
            serve(runner, agent, args.store, args.n_runners)
    except StoreUnreachableError as exc:
        return _fail(str(exc), 3)
    except (TypeError, ValueError, RuntimeError) as exc:
        return _fail(str(exc), 1)
    return 0


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM stops the runners like Ctrl-C: attempts recorded, processes and semaphores released, nothing leaked.
    Only the first one interrupts: a second one while the runners stop (a supervisor insisting) does not raise in the
    middle of their clean-up (the runner processes' own stop kills them on a repeated signal)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received = threading.Event()

    def interrupt(signum: int, frame: Any) -> None:
        if received.is_set():
            logger.warning("SIGTERM again: the runners are already stopping")
            return
        received.set()
        raise KeyboardInterrupt()

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def serve(runner: Any, agent: Any, url: str, n_runners: int) -> None:
    """Run `n_runners` runners against the store at `url` until they stop: in this process for one (which opens
    and closes the store), as child processes otherwise (each opens its own). Their worker ids name this host and
    their process.

    Raises:
        StoreUnreachableError: the store could not be reached within the runner's `connect_timeout`.
        RuntimeError: the runner processes could not go on.
    """
    import multiprocessing

    from agentlightning.execution.child import ChildStore, pickle_for_child
    from agentlightning.execution.events import MultiprocessingEvent, ThreadingEvent
    from agentlightning.execution.loop import run_interruptibly
    from agentlightning.execution.processes import ProcessGroup
    from agentlightning.trainer.bundle import AgentRunnerBundle

    bundle = AgentRunnerBundle(runner, agent, ())
    if n_runners == 1:  # in this process: a thread event (a process-shared one would need OS semaphores)
        try:
            run_interruptibly(_serve_one(bundle, url, ThreadingEvent()))
        except KeyboardInterrupt:
            logger.info("Interrupted (Ctrl-C or SIGTERM): the runner stopped")
        return
    ctx = multiprocessing.get_context("spawn")
    stop = MultiprocessingEvent(ctx=ctx)
    payload = pickle_for_child(bundle, "agent and runner")
    group = ProcessGroup(
        ctx,
        payload,
        ChildStore(url=url, api_key=os.environ.get("AGL_STORE_API_KEY") or None),
        stop,
        range(n_runners),
    )
    group.serve()


async def _serve_one(bundle: Any, url: str, stop: Any) -> None:
    from agentlightning.store.url import store_from_url

    store = store_from_url(url)
    try:
        await bundle(store, 0, stop)
    finally:
        await store.close()
