"""`ClientServerExecutionStrategy` ("cs", the Trainer's default): the store served over HTTP, runners as processes.

Roles (`role=` or `AGL_CURRENT_ROLE`):
- "both" (default): this process runs the algorithm and serves the store (`LightningStoreServer`); `n_runners` child
  processes run the runners against it with a `LightningStoreClient`.
- "algorithm": only the algorithm and the store server, on `server_host:server_port`; runners come from elsewhere
  (`agl runner --store http://host:port ...`, or the same script with `AGL_CURRENT_ROLE=runner`).
- "runner": only runners, against the server at `server_host:server_port`.

With `managed_store=False` (or `AGL_MANAGED_STORE=0`) the strategy serves nothing: both sides use the store they are
given (for runner processes it must be picklable, e.g. a `LightningStoreClient` of an external `agl store`).

Runner processes are started with 'spawn' (safe with threads; the agent must be importable or picklable), supervised
(a dead runner's attempt is released and the runner replaced) and stopped in four steps: the stop flag, SIGINT,
SIGTERM, SIGKILL. Ctrl-C (or SIGTERM) in the main process stops everything within seconds.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal, Optional

from agentlightning.env_var import LightningEnvVar, resolve_managed_store_flag, resolve_str_env_var

from .base import AlgorithmBundle, ExecutionStrategy, RunnerBundle
from .child import EXIT_INTERRUPTED, ChildStore, pickle_for_child
from .events import ExecutionEvent, MultiprocessingEvent
from .loop import run_interruptibly, run_supervised
from .processes import ProcessGroup
from .serving import serve_store
from .signals import describe_exit, join_until_deadline, stop_processes

if TYPE_CHECKING:
    from multiprocessing.context import BaseContext

    from agentlightning.store.base import LightningStore

__all__ = ["ClientServerExecutionStrategy"]

logger = logging.getLogger(__name__)

Role = Literal["algorithm", "runner", "both"]
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 4747


def _resolve_port(value: Optional[int]) -> Optional[int]:
    if value is not None:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 65535:
            raise ValueError(f"server_port must be an integer between 0 and 65535, got {value!r}")
        return value
    raw = os.environ.get(LightningEnvVar.AGL_SERVER_PORT.value, "").strip()
    if not raw:
        return None
    try:
        port = int(raw)
    except ValueError:
        raise ValueError(f"AGL_SERVER_PORT must be an integer, got {raw!r}") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"AGL_SERVER_PORT must be between 0 and 65535, got {port}")
    return port


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """In the main thread, SIGTERM stops the run like Ctrl-C (so a killed trainer leaves no runner behind)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class ClientServerExecutionStrategy(ExecutionStrategy):
    """See the module docstring.

    Args:
        role: "algorithm", "runner" or "both" (default: `AGL_CURRENT_ROLE`, else "both").
        server_host: address the store server binds / runners connect to (default: `AGL_SERVER_HOST`, else
            127.0.0.1). Binding another address than loopback needs an API key (`AGL_STORE_API_KEY`).
        server_port: port of the store server (default: `AGL_SERVER_PORT`; else a free port in role "both", 4747
            in the other roles).
        n_runners: runner processes.
        graceful_timeout: seconds runners get to finish after the stop flag is set, before SIGINT.
        terminate_timeout: seconds after SIGINT before SIGTERM, and after SIGTERM before SIGKILL.
        main_process: "algorithm" (default) or "runner" (runner 0 in this process, the algorithm and the server in
            a child process; for debugging a runner, requires role "both" and one runner).
        managed_store: serve the store and give runners clients (default: `AGL_MANAGED_STORE`, else true).
        allowed_exit_codes: exit codes of runner processes that are not errors.
        start_method: multiprocessing start method for the child processes ("spawn" by default).
        max_runner_restarts: times a runner that died while the run goes on is replaced.
        interrupt_grace: seconds runners get after Ctrl-C before they are sent SIGINT.
    """

    alias = "cs"

    def __init__(
        self,
        role: Optional[Role] = None,
        server_host: Optional[str] = None,
        server_port: Optional[int] = None,
        n_runners: int = 1,
        graceful_timeout: float = 10.0,
        terminate_timeout: float = 5.0,
        main_process: Literal["algorithm", "runner"] = "algorithm",
        managed_store: Optional[bool] = None,
        allowed_exit_codes: Sequence[int] = (0, -15),
        *,
        start_method: str = "spawn",
        max_runner_restarts: int = 3,
        interrupt_grace: float = 1.0,
    ) -> None:
        resolved_role = resolve_str_env_var(LightningEnvVar.AGL_CURRENT_ROLE, role, "both")
        if resolved_role not in ("algorithm", "runner", "both"):
            raise ValueError(f"role must be 'algorithm', 'runner' or 'both', got {resolved_role!r}")
        if isinstance(n_runners, bool) or not isinstance(n_runners, int) or n_runners < 1:
            raise ValueError(f"n_runners must be a positive integer, got {n_runners!r}")
        if main_process not in ("algorithm", "runner"):
            raise ValueError(f"main_process must be 'algorithm' or 'runner', got {main_process!r}")
        if main_process == "runner" and (resolved_role != "both" or n_runners != 1):
            raise ValueError("main_process='runner' requires role='both' and n_runners=1")
        if start_method not in multiprocessing.get_all_start_methods():
            raise ValueError(
                f"start_method must be one of {multiprocessing.get_all_start_methods()}, got {start_method!r}"
            )
        self.role: Role = resolved_role  # type: ignore[assignment]
        self.server_host = (
            resolve_str_env_var(LightningEnvVar.AGL_SERVER_HOST, server_host, DEFAULT_HOST) or DEFAULT_HOST
        )
        explicit_port = _resolve_port(server_port)
        self._port_is_explicit = explicit_port is not None
        self.server_port: int = (
            explicit_port if explicit_port is not None else (0 if self.role == "both" else DEFAULT_PORT)
        )
        self.n_runners = n_runners
        self.graceful_timeout = graceful_timeout
        self.terminate_timeout = terminate_timeout
        self.main_process = main_process
        self.managed_store = resolve_managed_store_flag(managed_store)
        self.allowed_exit_codes = tuple(allowed_exit_codes)
        self.start_method = start_method
        self.max_runner_restarts = max_runner_restarts
        self.interrupt_grace = interrupt_grace

    # ---------------------------------------------------------------------------------------------- helpers
    @property
    def endpoint(self) -> str:
        host = self.server_host if self.server_host not in ("0.0.0.0", "") else "127.0.0.1"
        return f"http://{host}:{self.server_port}"

    def _context(self) -> BaseContext:
        return multiprocessing.get_context(self.start_method)

    def _group(
        self,
        ctx: BaseContext,
        runner: RunnerBundle,
        store: LightningStore,
        stop: ExecutionEvent,
        *,
        url: Optional[str],
        reaper_store: Optional[LightningStore],
    ) -> ProcessGroup:
        payload = pickle_for_child(runner, "runner bundle (agent, runner, tracer and hooks)")
        if url is not None:
            child_store = ChildStore(url=url, api_key=os.environ.get("AGL_STORE_API_KEY") or None)
        else:
            child_store = ChildStore(payload=pickle_for_child(store, f"store ({type(store).__name__})"))
        return ProcessGroup(
            ctx,
            payload,
            child_store,
            stop,
            range(self.n_runners),
            reaper_store=reaper_store,
            max_restarts=self.max_runner_restarts,
            allowed_exit_codes=self.allowed_exit_codes,
            graceful_timeout=self.graceful_timeout,
            terminate_timeout=self.terminate_timeout,
            interrupt_grace=self.interrupt_grace,
        )

    def _server(self, store: LightningStore) -> Any:
        return serve_store(store, host=self.server_host, port=self.server_port)

    async def _start_server(self, server: Any) -> None:
        try:
            await server.start()
        except RuntimeError as exc:
            hint = (
                " Choose another port (Trainer(port=...) or AGL_SERVER_PORT), or leave it unset to use a free one."
                if self._port_is_explicit or self.role != "both"
                else ""
            )
            raise RuntimeError(f"{exc}{hint}") from exc
        self.server_port = server.port
        logger.info(
            "Store server on %s; more runners can join with: agl runner --store %s --agent <module:object>",
            server.endpoint,
            server.endpoint,
        )

    async def _execute_runner(
        self, runner: RunnerBundle, worker_id: int, store: LightningStore, stop: ExecutionEvent
    ) -> None:
        """Run one runner in this process (managed: against a client of the server it creates and closes)."""
        client: Optional[LightningStore] = None
        if self.managed_store:
            from agentlightning.store.http.client.client import LightningStoreClient

            client = store = LightningStoreClient(self.endpoint)
        try:
            await runner(store, worker_id, stop)
        except BaseException:
            stop.set()
            raise
        finally:
            if client is not None:
                await client.close()

    # ---------------------------------------------------------------------------------------------- execute
    def execute(self, algorithm: AlgorithmBundle, runner: RunnerBundle, store: LightningStore) -> None:
        """Run the sides of `role` (see the class docstring). A Ctrl-C (or a KeyboardInterrupt raised by a bundle)
        stops everything and is not raised (as in 0.2/0.3); `interrupted` tells whether it happened."""
        ctx = self._context()
        stop = MultiprocessingEvent(ctx=ctx)
        self.interrupted = False
        with _sigterm_as_interrupt():
            if self.role == "algorithm":
                self._execute_algorithm_role(algorithm, store, stop)
            elif self.role == "runner":
                self._execute_runner_role(ctx, runner, store, stop)
            elif self.main_process == "algorithm":
                self._execute_both(ctx, algorithm, runner, store, stop)
            else:
                self._execute_both_runner_main(ctx, algorithm, runner, store, stop)

    def _execute_algorithm_role(self, algorithm: AlgorithmBundle, store: LightningStore, stop: ExecutionEvent) -> None:
        server = self._server(store) if self.managed_store else None
        try:
            if server is not None:
                run_interruptibly(self._start_server(server))
            run_interruptibly(run_supervised(algorithm, server or store, stop, None))
        except KeyboardInterrupt:
            self.interrupted = True
            logger.warning("Interrupted (Ctrl-C): stopping the algorithm")
        finally:
            stop.set()
            if server is not None:
                run_interruptibly(server.stop())

    def _execute_runner_role(
        self, ctx: BaseContext, runner: RunnerBundle, store: LightningStore, stop: ExecutionEvent
    ) -> None:
        if self.n_runners == 1:
            try:
                run_interruptibly(self._execute_runner(runner, 0, store, stop))
            except KeyboardInterrupt:
                self.interrupted = True
                logger.warning("Interrupted (Ctrl-C): the runner stopped")
            return
        group = self._group(
            ctx, runner, store, stop, url=self.endpoint if self.managed_store else None, reaper_store=None
        )
        self.interrupted = group.serve()

    def _execute_both(
        self,
        ctx: BaseContext,
        algorithm: AlgorithmBundle,
        runner: RunnerBundle,
        store: LightningStore,
        stop: ExecutionEvent,
    ) -> None:
        server = self._server(store) if self.managed_store else None
        group: Optional[ProcessGroup] = None
        interrupted = False
        failed = False
        try:
            # Unmanaged, runners get the store itself (it must be picklable); managed, a URL of the server.
            group = self._group(
                ctx,
                runner,
                store,
                stop,
                url=None if server is None else self.endpoint,  # the real port is known once the server runs
                reaper_store=store,
            )
            if server is not None:
                run_interruptibly(self._start_server(server))
                group.set_url(server.endpoint)
            group.start()
            run_interruptibly(run_supervised(algorithm, server or store, stop, group))
        except KeyboardInterrupt:
            interrupted = self.interrupted = True
            logger.warning("Interrupted (Ctrl-C): stopping the algorithm and the runners")
        except BaseException:
            failed = True
            raise
        finally:
            stop.set()
            if group is not None:
                group.shutdown(interrupted=interrupted)
            if server is not None:
                try:
                    run_interruptibly(server.stop())
                except Exception:
                    logger.exception("Stopping the store server failed")
            if group is not None and (interrupted or failed):
                self._warn_exit_codes(group)
        if group is not None and not interrupted:
            group.check_exit_codes()

    @staticmethod
    def _warn_exit_codes(group: ProcessGroup) -> None:
        """While another error or an interrupt ends the run, bad exit codes are only logged."""
        try:
            group.check_exit_codes()
        except RuntimeError as exc:
            logger.warning("%s", exc)

    def _execute_both_runner_main(
        self,
        ctx: BaseContext,
        algorithm: AlgorithmBundle,
        runner: RunnerBundle,
        store: LightningStore,
        stop: ExecutionEvent,
    ) -> None:
        # The algorithm side (datasets, adapter, store) rarely pickles; this debugging mode forks it where it can.
        methods = multiprocessing.get_all_start_methods()
        fork_ctx = multiprocessing.get_context("fork") if "fork" in methods else ctx
        port = fork_ctx.Value("i", -1)  # type: ignore[attr-defined]
        process = fork_ctx.Process(  # type: ignore[attr-defined]
            target=_algorithm_process_main,
            args=(algorithm, store, self, stop, port),
            name="algorithm",
        )
        process.start()
        interrupted = False
        try:
            while port.value < 0 and process.exitcode is None:
                join_until_deadline([process], 0.05)
            if port.value < 0:
                raise RuntimeError(
                    f"The algorithm process exited with {describe_exit(process.exitcode)} before serving"
                )
            if self.managed_store:
                self.server_port = int(port.value)
            run_interruptibly(self._execute_runner(runner, 0, store, stop))
            join_until_deadline([process], None)  # the runner finishing does not stop the algorithm
        except KeyboardInterrupt:
            interrupted = self.interrupted = True
            logger.warning("Interrupted (Ctrl-C): stopping the runner and the algorithm")
        finally:
            stop.set()
            stop_processes(
                [process], first_wait=1.0 if interrupted else self.graceful_timeout, step_timeout=self.terminate_timeout
            )
        if process.exitcode == EXIT_INTERRUPTED:
            self.interrupted = interrupted = True
        if not interrupted and process.exitcode not in self.allowed_exit_codes:
            raise RuntimeError(f"The algorithm process failed with {describe_exit(process.exitcode)}")


def _algorithm_process_main(
    algorithm: AlgorithmBundle,
    store: LightningStore,
    strategy: ClientServerExecutionStrategy,
    stop: ExecutionEvent,
    port: Any,
) -> None:
    """Entry point of the algorithm process of `main_process="runner"`."""
    import sys

    signal.signal(signal.SIGINT, signal.default_int_handler)
    server = strategy._server(store) if strategy.managed_store else None
    try:
        if server is not None:
            run_interruptibly(strategy._start_server(server))
        port.value = strategy.server_port
        run_interruptibly(run_supervised(algorithm, server or store, stop, None))
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERRUPTED)
    except Exception:
        logger.exception("The algorithm failed")
        sys.exit(1)
    finally:
        stop.set()  # the run is over when the algorithm is: the runner in the main process stops too
        if server is not None:
            run_interruptibly(server.stop())
