"""The Python snippets a user copies from README.md and docs/ run as written.

Every ```python block of README.md and docs/*.md is one of:
- a program (its first line is an import): run in a fresh process, in an empty folder, with what the text before it
  says is there (a store server, `agl serve`, a store or a file an earlier command wrote: `_SETUP`, `_servers`);
- a fragment (it continues the page): checked without running: it parses, and every name it reads is bound by
  itself or by an earlier snippet of the same page, is a builtin or a standard-library module.
No snippet reaches into a private attribute (`obj._name`). The only changes made to a program's text: the local
model address `http://127.0.0.1:8000/v1` becomes the fake OpenAI-compatible server's (tests/fake_openai_server.py),
or the embedded SmolLM2's for the Agents SDK example (which needs the Responses API) and the Anthropic SDK example
(the Messages API, whose client is given the address without `/v1`); fixed ports become free ones
(`port=4747` and `port=4000` as `port=0`/`None` say, `http://127.0.0.1:4747` the test's store server); runner counts
become 1; GRPO trains the tiny random model (`agentlightning.inference.tiny`) for one step instead of SmolLM2 for
12 minutes. `OPENAI_BASE_URL` / `OPENAI_API_KEY` point the OpenAI client at the fake server (not for the Agents SDK
example, which must not need them).

Not run (the reason is checked to still apply): the VERL example (verl and NVIDIA GPUs) and the PostgreSQL example
(a database server of the reader's, `db.internal`; tests/store runs the same calls against a local PostgreSQL).
"""

from __future__ import annotations

import ast
import asyncio
import builtins
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NOT_RUN = {
    "agl.VERL(": "needs verl and NVIDIA GPUs",
    "postgresql://agl@db.internal": "a PostgreSQL server of the reader's",
}
LOCAL_MODEL = "http://127.0.0.1:8000/v1"
STORE_SERVER = "http://127.0.0.1:4747"
_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
_KNOWN_NAMES = set(dir(builtins)) | set(sys.stdlib_module_names)


def _snippets(paths: list[Path]) -> Iterator[tuple[str, str]]:
    for path in paths:
        text = path.read_text()
        for match in _BLOCK.finditer(text):
            line = text[: match.start()].count("\n") + 2
            yield f"{path.name}:{line}", match.group(1)


def _is_program(code: str) -> bool:
    first = code.lstrip().splitlines()[0] if code.strip() else ""
    return first.startswith(("import ", "from "))


def _runnable() -> list[tuple[str, str]]:
    return [
        (name, code)
        for name, code in _snippets(DOCS)
        if _is_program(code) and not any(marker in code for marker in NOT_RUN)
    ]


def _fragments() -> list[tuple[str, str, str]]:
    """(name, code, the page's snippets before it) of every snippet that is not a program."""
    found = []
    for path in DOCS:
        earlier: list[str] = []
        for name, code in _snippets([path]):
            if not _is_program(code):
                found.append((name, code, "\n".join(earlier)))
            earlier.append(code)
    return found


def _parse(code: str, name: str) -> ast.Module:
    flags = ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    return compile(code, name, "exec", flags=flags, dont_inherit=True)  # type: ignore[no-any-return]


def _bound(tree: ast.AST) -> set[str]:
    """Every name a snippet binds, in any scope (a fragment may continue any part of an earlier snippet)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
    return names


def unbound_names(code: str, context: str, name: str = "<snippet>") -> set[str]:
    """The names `code` reads that neither it, `context` (the page before it), builtins nor the standard library
    bind."""
    tree = _parse(code, name)
    known = _KNOWN_NAMES | _bound(tree) | (_bound(_parse(context, "<page>")) if context.strip() else set())
    read = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
    return read - known


def private_attributes(code: str) -> set[str]:
    """The private attributes (`._name`, not dunders) a snippet uses."""
    tree = _parse(code, "<snippet>")
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
    }


def test_snippets_start_the_trainer_only_under_a_main_guard() -> None:
    offenders = []
    for name, code in _snippets(DOCS):
        for line in code.splitlines():
            if re.match(r"^\w[\w.]*\.(fit|dev)\(", line) or re.match(r"^\w+ = (agl\.)?Trainer\(", line):
                offenders.append(f"{name}: {line.strip()}")
    assert offenders == []


def test_the_snippets_that_are_run_cover_the_training_ones() -> None:
    names = {name.split(":")[0] for name, code in _runnable() if ".fit(" in code}
    assert names == {"README.md", "runtime.md", "algorithms.md"}
    assert len([1 for _, code in _runnable() if "= agl.APO(" in code or "= agl.GRPO(" in code]) == 2


def test_the_snippets_that_are_not_run_still_need_what_they_are_not_run_for() -> None:
    skipped = [name for name, code in _snippets(DOCS) if _is_program(code) and any(m in code for m in NOT_RUN)]
    assert sorted(name.split(":")[0] for name in skipped) == ["algorithms.md", "stores.md"]


@pytest.mark.parametrize(("name", "code", "context"), _fragments(), ids=[name for name, _, _ in _fragments()])
def test_a_fragment_reads_only_names_its_page_binds(name: str, code: str, context: str) -> None:
    assert unbound_names(code, context, name) == set(), f"{name} reads names no earlier snippet of its page binds"


@pytest.mark.parametrize(("name", "code"), list(_snippets(DOCS)), ids=[name for name, _ in _snippets(DOCS)])
def test_a_snippet_uses_no_private_attribute(name: str, code: str) -> None:
    assert private_attributes(code) == set()


def test_the_fragment_check_finds_a_name_nothing_binds() -> None:
    page = "async def main():\n    client = make()\n"
    assert unbound_names("exporter = Exporter(client.url, key)", page) == {"Exporter", "key"}
    assert unbound_names("print(os.environ['X'], client)", page) == set()
    assert private_attributes("with tracer._trace_context_sync(): pass") == {"_trace_context_sync"}


def test_the_docs_name_the_store_agl_demo_uses(capsys: pytest.CaptureFixture[str]) -> None:
    from agentlightning.cli.demo import main as demo

    with pytest.raises(SystemExit):
        demo(["--help"])
    default = re.search(r"\(default: (\S+)\)", capsys.readouterr().out).group(1)  # type: ignore[union-attr]
    claims = []
    for path in DOCS:
        for sentence in re.findall(r"`agl demo`[^.]*\.", path.read_text().replace("\n", " ")):
            claims += [(path.name, url) for url in re.findall(r"`([a-z]+://[^`]*|[\w./-]+\.db)`", sentence)]
    assert claims and all(url == default or "--store" in url for _, url in claims), claims


# ------------------------------------------------------------------------------------------ running the programs
def _write_store(path: Path) -> None:
    """A SQLite store holding two captured rollouts, as a run leaves it (for the export examples)."""
    from agentlightning.store.sqlite.store import SqliteLightningStore

    from .export.builders import Call, add_rollout, two_turns

    async def fill() -> None:
        store = SqliteLightningStore(str(path))
        try:
            await add_rollout(store, two_turns([1, 2], [7], ([10], [12])), reward=1.0)
            await add_rollout(store, [Call([1, 2], [11])], reward=1.0)
        finally:
            await store.close()

    path.parent.mkdir(parents=True, exist_ok=True)
    asyncio.run(fill())


def _write_sft_jsonl(folder: Path) -> None:
    """What `agl export --store sqlite:///runs/store.db --kind sft --out sft.jsonl` (the command above) writes."""
    from agentlightning.cli import main as agl

    _write_store(folder / "runs" / "store.db")
    assert (
        agl(
            [
                "export",
                "--store",
                f"sqlite:///{folder / 'runs' / 'store.db'}",
                "--out",
                str(folder / "sft.jsonl"),
                "--quiet",
            ]
        )
        == 0
    )


def _needs_the_default_model() -> None:
    pytest.importorskip("torch", reason="the inference extra (torch) is not installed")
    from agentlightning.inference.model_files import ModelFilesError, find_packaged_gguf

    try:
        find_packaged_gguf()
    except ModelFilesError as exc:
        pytest.skip(str(exc))


# Files and modules a program needs because the text before it made or installed them: marker -> setup(folder).
_SETUP: dict[str, Callable[[Path], None]] = {
    'data_files="sft.jsonl"': _write_sft_jsonl,
    'store_from_url("sqlite:///runs/store.db")': lambda folder: _write_store(folder / "runs" / "store.db"),
}
_NEEDS: dict[str, Callable[[], Any]] = {
    "agl.GRPO(": lambda: pytest.importorskip("torch"),
    "from trl import": lambda: (
        pytest.importorskip("trl"),
        pytest.importorskip("datasets"),
        _needs_the_default_model(),
    ),
    "InferenceEngine.from_default()": _needs_the_default_model,
    "from agents import": lambda: (pytest.importorskip("agents"), _needs_the_default_model()),
    "import anthropic": lambda: (pytest.importorskip("anthropic"), _needs_the_default_model()),
    "opentelemetry.exporter.otlp": lambda: pytest.importorskip("opentelemetry.exporter.otlp.proto.http"),
}


def _prepare(code: str, servers: dict[str, str]) -> str:
    if LOCAL_MODEL in code:
        code = code.replace(LOCAL_MODEL, servers["smollm2" if "from agents import" in code else "fake"])
    if "import anthropic" in code:  # the Anthropic SDK adds /v1/messages to the server's address itself
        code = code.replace(f'"{LOCAL_MODEL.removesuffix("/v1")}"', f'"{servers["smollm2"].removesuffix("/v1")}"')
    if STORE_SERVER in code:
        code = code.replace(STORE_SERVER, servers["store"])
    code = code.replace("port=4747", "port=0").replace("port=4000", "port=None")
    code = re.sub(r"n_runners=\d+", "n_runners=1", code)
    if "agl.GRPO(" in code:
        code = code.replace("agl.GRPO(", "agl.GRPO(engine=_tiny_engine(), ")
        code = code.replace("max_minutes=12", "max_steps=1")
        code = "from agentlightning.inference.tiny import build_tiny_engine as _tiny_engine\n" + code
    return code


class _LazyServers(dict):  # type: ignore[type-arg]
    """The servers programs talk to, each started on first use: the fake OpenAI server, a store server with the key
    the client example sends, and `agl serve`'s SmolLM2."""

    def __init__(self) -> None:
        super().__init__()
        self._stops: list[Callable[[], None]] = []

    def __missing__(self, key: str) -> str:
        if key == "fake":
            from .fake_openai_server import FakeOpenAIServer

            fake = FakeOpenAIServer().__enter__()
            self._stops.append(lambda: fake.__exit__(None, None, None))
            url = fake.base_url
        elif key == "store":
            from agentlightning.store import InMemoryLightningStore
            from agentlightning.store.client_server import LightningStoreServer

            store_server = LightningStoreServer(InMemoryLightningStore(), port=0, api_key="...")
            asyncio.run(store_server.start())
            self._stops.append(lambda: asyncio.run(store_server.stop()))
            url = store_server.endpoint
        else:
            from agentlightning.inference.engine import InferenceEngine
            from agentlightning.inference.server import InferenceServer

            engine = InferenceEngine.from_default()
            inference = InferenceServer(engine, port=0).start()

            def stop_inference() -> None:
                inference.stop()
                engine.close()

            self._stops.append(stop_inference)
            url = inference.endpoint
        self[key] = url
        return url

    def stop(self) -> None:
        for stop in reversed(self._stops):
            stop()


@pytest.fixture(scope="module")
def servers() -> Iterator[_LazyServers]:
    started = _LazyServers()
    try:
        yield started
    finally:
        started.stop()


@pytest.mark.parametrize(("name", "code"), _runnable(), ids=[name for name, _ in _runnable()])
def test_the_snippet_runs(name: str, code: str, servers: _LazyServers, tmp_path: Path) -> None:
    for marker, need in _NEEDS.items():
        if marker in code:
            need()
    for marker, setup in _SETUP.items():
        if marker in code:
            setup(tmp_path)
    script = tmp_path / "snippet.py"
    script.write_text(_prepare(code, servers))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("OPENAI_API_KEY", None)
    if "from agents import" not in code:
        env.update({"OPENAI_BASE_URL": servers["fake"], "OPENAI_API_KEY": "test"})
    env["HF_HUB_OFFLINE"] = "1"  # a snippet never needs the network
    result = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, f"{name} failed:\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
    assert "Traceback" not in result.stderr, result.stderr[-4000:]
    output = result.stdout + result.stderr
    assert "OPENAI_API_KEY is not set" not in output
    assert len(re.findall(r"rollouts? finished in", output)) <= 1, f"{name} shows the run's summary twice"
