"""The OpenAI/vLLM-compatible inference server over HTTP (tiny model)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch", reason="the inference extra (torch) is not installed")

import httpx
from safetensors.torch import save_model

from agentlightning.inference.server import InferenceServer
from agentlightning.inference.tiny import build_tiny_engine

MESSAGES = [{"role": "user", "content": "Say hi"}]


@pytest.fixture(scope="module")
def server() -> Iterator[InferenceServer]:
    with InferenceServer(build_tiny_engine(seed=0), served_model_names=["tiny-chat", "alias"]) as running:
        yield running


def chat(server: InferenceServer, **body: Any) -> httpx.Response:
    payload = {"model": "tiny-chat", "messages": MESSAGES, "max_tokens": 8, "temperature": 0, **body}
    return httpx.post(f"{server.endpoint}/chat/completions", json=payload, timeout=60)


def stream_chunks(server: InferenceServer, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    chunks = []
    with httpx.stream("POST", f"{server.endpoint}{path}", json={**body, "stream": True}, timeout=60) as response:
        assert response.status_code == 200
        lines = [line for line in response.iter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    for line in lines[:-1]:
        assert line.startswith("data: ")
        chunks.append(json.loads(line[len("data: ") :]))
    return chunks


def test_chat_completion_returns_token_ids_when_asked(server: InferenceServer) -> None:
    body = chat(server, return_token_ids=True).json()
    choice = body["choices"][0]
    assert body["object"] == "chat.completion" and body["model"] == "tiny-chat"
    assert len(choice["token_ids"]) == 8 and choice["finish_reason"] == "length"
    assert body["prompt_token_ids"] and body["usage"] == {
        "prompt_tokens": len(body["prompt_token_ids"]),
        "completion_tokens": 8,
        "total_tokens": len(body["prompt_token_ids"]) + 8,
    }


def test_chat_completion_omits_token_ids_by_default(server: InferenceServer) -> None:
    body = chat(server).json()
    assert "prompt_token_ids" not in body and "token_ids" not in body["choices"][0]


def test_a_streamed_chat_carries_the_same_token_ids_as_a_plain_one(server: InferenceServer) -> None:
    plain = chat(server, return_token_ids=True).json()
    chunks = stream_chunks(
        server,
        "/chat/completions",
        {"model": "tiny-chat", "messages": MESSAGES, "max_tokens": 8, "temperature": 0, "return_token_ids": True,
         "stream_options": {"include_usage": True}},
    )  # fmt: skip
    assert chunks[0]["prompt_token_ids"] == plain["prompt_token_ids"]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    token_ids = [t for c in chunks for choice in c["choices"] for t in choice.get("token_ids", [])]
    text = "".join(choice["delta"].get("content") or "" for c in chunks for choice in c["choices"])
    assert token_ids == plain["choices"][0]["token_ids"]
    assert text == plain["choices"][0]["message"]["content"]
    assert chunks[-1]["usage"]["completion_tokens"] == 8 and chunks[-1]["choices"] == []
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "length"


def test_several_choices_come_back_indexed(server: InferenceServer) -> None:
    body = chat(server, n=3, temperature=1.0, seed=1).json()
    assert [choice["index"] for choice in body["choices"]] == [0, 1, 2]


def test_chat_logprobs_follow_the_openai_shape(server: InferenceServer) -> None:
    body = chat(server, logprobs=True, top_logprobs=2, max_tokens=3).json()
    content = body["choices"][0]["logprobs"]["content"]
    assert len(content) == 3 and all(len(entry["top_logprobs"]) == 2 for entry in content)


def test_completions_accept_text_or_token_id_prompts(server: InferenceServer) -> None:
    url = f"{server.endpoint}/completions"
    by_text = httpx.post(url, json={"model": "alias", "prompt": "abc", "max_tokens": 4, "temperature": 0,
                                    "return_token_ids": True, "logprobs": 1}).json()  # fmt: skip
    by_ids = httpx.post(url, json={"model": "alias", "prompt": by_text["prompt_token_ids"], "max_tokens": 4,
                                   "temperature": 0, "return_token_ids": True}).json()  # fmt: skip
    assert by_text["choices"][0]["token_ids"] == by_ids["choices"][0]["token_ids"]
    assert by_text["choices"][0]["prompt_token_ids"] == by_text["prompt_token_ids"]  # vLLM: inside the choice
    assert len(by_text["choices"][0]["logprobs"]["tokens"]) == 4


def test_streamed_completions_add_up(server: InferenceServer) -> None:
    body = {"model": "tiny-chat", "prompt": "abc", "max_tokens": 5, "temperature": 0, "return_token_ids": True}
    plain = httpx.post(f"{server.endpoint}/completions", json=body).json()
    chunks = stream_chunks(server, "/completions", body)
    assert chunks[0]["choices"][0]["prompt_token_ids"] == plain["choices"][0]["prompt_token_ids"]
    assert all("prompt_token_ids" not in c["choices"][0] for c in chunks[1:])
    assert "".join(c["choices"][0]["text"] for c in chunks) == plain["choices"][0]["text"]
    assert [t for c in chunks for t in c["choices"][0]["token_ids"]] == plain["choices"][0]["token_ids"]


def test_models_lists_the_served_names(server: InferenceServer) -> None:
    data = httpx.get(f"{server.endpoint}/models").json()["data"]
    assert [model["id"] for model in data] == ["tiny-chat", "alias"]


def test_an_unknown_model_is_a_404(server: InferenceServer) -> None:
    response = chat(server, model="gpt-9")
    assert response.status_code == 404 and response.json()["error"]["code"] == "model_not_found"


@pytest.mark.parametrize(
    "body, message",
    [
        ({"messages": []}, "messages"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"temperature": -2}, "temperature"),
        ({"max_tokens": 10_000}, "context"),
        ({"top_k": 0, "temperature": 1}, None),
    ],
)
def test_invalid_requests_get_a_400_naming_the_problem(
    server: InferenceServer, body: dict[str, Any], message: str | None
) -> None:
    response = chat(server, **body)
    if message is None:
        assert response.status_code == 200  # top_k 0 means "disabled", as in OpenAI-compatible servers
        return
    assert response.status_code == 400
    assert message in response.json()["error"]["message"]


def test_malformed_json_is_a_400(server: InferenceServer) -> None:
    response = httpx.post(
        f"{server.endpoint}/chat/completions", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert response.status_code == 400


def test_weights_are_swapped_over_http(tmp_path: Path) -> None:
    with InferenceServer(build_tiny_engine(seed=0)) as running:
        base = f"{running.endpoint}"
        assert httpx.get(f"{base}/weights").json()["version"] == "base"
        save_model(build_tiny_engine(seed=2).model, str(tmp_path / "model.safetensors"))
        swapped = httpx.post(f"{base}/weights", json={"path": str(tmp_path), "version": "step-1"})
        assert swapped.status_code == 200 and swapped.json()["version"] == "step-1"
        assert httpx.get(f"{base}/weights").json()["version"] == "step-1"
        bad = httpx.post(f"{base}/weights", json={"path": str(tmp_path / "missing"), "version": "x"})
        assert bad.status_code == 400 and "No weights file" in bad.json()["error"]["message"]


def test_an_api_key_protects_every_route_but_health() -> None:
    with InferenceServer(build_tiny_engine(seed=0), api_key="s3cret") as running:
        root = running.endpoint.removesuffix("/v1")
        assert httpx.get(f"{root}/health").status_code == 200
        assert httpx.get(f"{running.endpoint}/models").status_code == 401
        ok = httpx.get(f"{running.endpoint}/models", headers={"authorization": "Bearer s3cret"})
        assert ok.status_code == 200


def test_concurrent_http_requests_are_decoded_in_one_batch() -> None:
    engine = build_tiny_engine(seed=0)
    questions = ["Hi", "What is 2+2?", "Tell me a story about a cat.", "x"]

    async def ask(client: httpx.AsyncClient, endpoint: str, question: str, stream: bool) -> list[int]:
        body = {"model": "tiny-chat", "messages": [{"role": "user", "content": question}], "max_tokens": 6,
                "temperature": 0, "return_token_ids": True, "stream": stream}  # fmt: skip
        if not stream:
            return (await client.post(f"{endpoint}/chat/completions", json=body)).json()["choices"][0]["token_ids"]
        tokens: list[int] = []
        async with client.stream("POST", f"{endpoint}/chat/completions", json=body) as response:
            async for line in response.aiter_lines():
                if line.startswith("data: {"):
                    tokens += [t for c in json.loads(line[6:])["choices"] for t in c.get("token_ids", [])]
        return tokens

    async def scenario(endpoint: str) -> tuple[list[list[int]], list[list[int]]]:
        async with httpx.AsyncClient(timeout=60) as client:
            alone = [await ask(client, endpoint, q, stream=False) for q in questions]
            with engine.paused():  # hold generation until every request has arrived
                tasks = [asyncio.ensure_future(ask(client, endpoint, q, i % 2 == 0)) for i, q in enumerate(questions)]
                while engine.batch_stats["waiting"] < len(questions):
                    await asyncio.sleep(0.01)
            return alone, list(await asyncio.gather(*tasks))

    with InferenceServer(engine) as running:
        alone, together = asyncio.run(scenario(running.endpoint))
    assert together == alone
    assert engine.batch_stats["largest_batch"] == len(questions)


def test_the_openai_sdk_talks_to_the_server(server: InferenceServer) -> None:
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=server.endpoint, api_key="unused")
    reply = client.chat.completions.create(model="tiny-chat", messages=MESSAGES, max_tokens=4, temperature=0)  # type: ignore[arg-type]
    assert reply.choices[0].finish_reason == "length"
