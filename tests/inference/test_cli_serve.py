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
