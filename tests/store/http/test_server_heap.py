"""A process serving the store freezes its start-up heap, so that full garbage collections skip the imported
libraries. Each case runs in a fresh interpreter: freezing is process-wide and must not touch the test process."""

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


def test_starting_a_store_server_freezes_its_process_heap() -> None:
    out = _run(
        """
        import asyncio, gc
        from agentlightning.store import InMemoryLightningStore
        from agentlightning.store.client_server import LightningStoreClient, LightningStoreServer

        async def main():
            server = LightningStoreServer(InMemoryLightningStore(), host="127.0.0.1", port=0)
            before = gc.get_freeze_count()
            await server.start()
            client = LightningStoreClient(server.endpoint)
            worker = await client.update_worker("worker-1", {"beat": 1})
            await client.close()
            await server.stop()
            print(before, gc.get_freeze_count() > 1000, worker.worker_id)

        asyncio.run(main())
        """
    )
    assert out == "0 True worker-1"
