"""`agl store` freezes its start-up heap, so that full garbage collections skip the imported libraries; a server
started inside a user's process does not. Each case runs in a fresh interpreter: freezing is process-wide."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from agentlightning.store.http.server.heap import FREEZE_ENV


def _run(code: str, **env: str) -> str:
    environment = {key: value for key, value in os.environ.items() if key != FREEZE_ENV}
    environment.update(env)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120, env=environment
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_freezing_moves_the_live_objects_out_of_the_collectors_generations() -> None:
    out = _run(
        """
        import gc
        from agentlightning.store.http.server.heap import freeze_startup_heap
        before = gc.get_freeze_count()
        print(before, freeze_startup_heap(), gc.get_freeze_count() > 1000)
        """
    )
    assert out == "0 True True"


def test_freezing_happens_once_per_process() -> None:
    out = _run(
        """
        from agentlightning.store.http.server.heap import freeze_startup_heap
        print(freeze_startup_heap(), freeze_startup_heap())
        """
    )
    assert out == "True False"


def test_the_environment_variable_turns_freezing_off() -> None:
    out = _run(
        """
        import gc
        from agentlightning.store.http.server.heap import freeze_startup_heap
        print(freeze_startup_heap(), gc.get_freeze_count())
        """,
        **{FREEZE_ENV: "0"},
    )
    assert out == "False 0"


def test_agl_store_freezes_the_heap_of_its_process_once_it_serves() -> None:
    out = _run(
        """
        import gc, os, signal, socket, threading, time
        from agentlightning.cli.store import main

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        seen = []

        def watch():
            # Stop it only once it froze its heap and handles SIGTERM: the CLI freezes first, and a SIGTERM in
            # between would end the process by the default action (exit -15) instead of a clean stop.
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and (
                gc.get_freeze_count() == 0 or signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
            ):
                time.sleep(0.05)
            seen.append(gc.get_freeze_count())
            os.kill(os.getpid(), signal.SIGTERM)

        threading.Thread(target=watch, daemon=True).start()
        code = main(["--host", "127.0.0.1", "--port", str(port)])
        print(code, seen[0] > 1000)
        """
    )
    assert out == "0 True"


def test_a_server_started_inside_a_users_process_leaves_its_heap_alone() -> None:
    out = _run(
        """
        import asyncio, gc
        from agentlightning.store import InMemoryLightningStore
        from agentlightning.store.client_server import LightningStoreClient, LightningStoreServer

        async def main():
            server = LightningStoreServer(InMemoryLightningStore(), host="127.0.0.1", port=0)
            await server.start()
            client = LightningStoreClient(server.endpoint)
            worker = await client.update_worker("worker-1", {"beat": 1})
            await client.close()
            await server.stop()
            print(gc.get_freeze_count(), worker.worker_id)

        asyncio.run(main())
        """
    )
    assert out == "0 worker-1"
