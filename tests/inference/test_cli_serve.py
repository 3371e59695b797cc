"""`agl serve` as a new user meets it: install hints, bad model paths, --help, and the names models are served under."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import httpx
import pytest

from agentlightning.cli import serve


def test_help_shows_the_defaults_and_the_api_key_variable(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        serve.main(["--help"])
    assert exited.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: default)" in text and "(default: 127.0.0.1)" in text and "(default: 8000)" in text
    assert "(default: 32)" in text and "AGL_INFERENCE_API_KEY" in text and "tiny-chat" in text


def test_a_model_path_that_does_not_exist_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert serve.main(["--model", "/nonexistent"]) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "'/nonexistent' does not exist" in error and error.startswith("agl serve:")


def test_a_folder_without_config_is_one_line(tmp_path: os.PathLike[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert serve.main(["--model", str(tmp_path)]) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "has no config.json" in error


def test_without_torch_it_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` fail as if it were not installed
    assert serve.main(["--model", "tiny"]) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    assert "torch is not installed" in error and "pip install 'agentlightning[inference]'" in error
    assert "download.pytorch.org/whl/cpu" in error


def test_tiny_is_served_as_tiny_chat() -> None:
    pytest.importorskip("torch", reason="the inference extra (torch) is not installed")
    process = subprocess.Popen(
        [sys.executable, "-m", "agentlightning", "serve", "--model", "tiny", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        match = re.search(r"Serving tiny-chat at (http://\S+/v1)", line)
        assert match, line
        models = httpx.get(f"{match.group(1)}/models", timeout=30).json()
        assert [model["id"] for model in models["data"]] == ["tiny-chat"]
    finally:
        process.terminate()
        assert process.wait(timeout=60) == 0


def test_it_says_what_it_loads_at_once_and_how_long_loading_took() -> None:
    pytest.importorskip("torch", reason="the inference extra (torch) is not installed")
    process = subprocess.Popen(
        [sys.executable, "-m", "agentlightning", "serve", "--model", "tiny", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None and process.stdout is not None
        assert process.stderr.readline() == "agl serve: loading tiny (a small random model)...\n"
        assert re.fullmatch(r"agl serve: loaded tiny-chat in \d+\.\d s\n", process.stderr.readline())
        assert process.stdout.readline().startswith("Serving tiny-chat at ")
    finally:
        process.terminate()
        process.wait(timeout=60)


def test_the_default_models_first_load_is_announced_as_a_conversion(
    monkeypatch: pytest.MonkeyPatch, tmp_path: os.PathLike[str]
) -> None:
    from agentlightning.inference.model_files import ModelFilesError, find_packaged_gguf

    try:
        find_packaged_gguf()
    except ModelFilesError as exc:
        pytest.skip(str(exc))
    monkeypatch.setenv("AGL_MODEL_CACHE", str(tmp_path))  # nothing converted yet
    line = serve.loading_line("default")
    assert line.startswith("agl serve: loading SmolLM2-135M-Instruct (the embedded default model; first use: ")
    assert "converting its GGUF" in line and "10-50 s" in line
    assert serve.loading_line("/models/qwen") == "agl serve: loading /models/qwen..."
