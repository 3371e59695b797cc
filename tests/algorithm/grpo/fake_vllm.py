"""A vLLM-like OpenAI server on loopback, in process, for the tests of `VllmServing` (no vLLM needed).

What it imitates of vLLM's API: `GET /health`, `GET /v1/models` (the base model, plus each loaded adapter with
`parent` set to it), runtime LoRA loading (`POST /v1/load_lora_adapter {"lora_name", "lora_path"}`: 400 when the
name is taken or the folder has no adapter_config.json; `POST /v1/unload_lora_adapter {"lora_name"}`: 404 when not
loaded), and `POST /v1/chat/completions` for the base model or a loaded adapter (404 for any other name), answered
by a real backend (our inference server around the tiny model: real token ids of a real chat template) with the
model renamed to the one requested. `hold_requests()` keeps chat answers back until released, to put a request in
flight across a weight swap. With `dev_mode` set it also answers the dev-mode routes of an in-place weight reload
(`POST /pause?mode=wait`, `POST /collective_rpc {"method": "reload_weights", "kwargs": {"weights_path"}}`,
`POST /resume`), recording each reload's folder and the order of the calls. Run as a script (`fake_vllm.py serve <folder> --port N --served-model-name M`) it
stands in for the `vllm` CLI, serving the tiny model saved in `<folder>` (and exits 1 when that is no model folder).
"""

from __future__ import annotations

import json
import sys
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Optional


class FakeVllm:
    """The server; `backend` is the base URL (`.../v1`) of an OpenAI-compatible server that generates."""

    def __init__(self, backend: str, backend_model: str, *, model_name: str = "policy", port: int = 0) -> None:
        self.backend = backend.rstrip("/")
        self.backend_model = backend_model
        self.model_name = model_name
        self.adapters: dict[str, str] = {}
        self.loads: list[str] = []
        self.unloads: list[str] = []
        self.chat_models: list[str] = []  # the model named by each chat request, in arrival order
        self.refuse_loads: Optional[str] = None  # a message: every adapter load is answered 400 with it
        self.dev_mode = False  # True: /pause, /collective_rpc and /resume answer (VLLM_SERVER_DEV_MODE=1)
        self.reloads: list[str] = []  # the weights_path of each reload_weights call
        self.dev_calls: list[str] = []  # "pause", "reload", "resume" in the order they came
        self._release = threading.Event()
        self._release.set()
        self.in_flight = threading.Semaphore(0)  # released once per chat request that reached the server
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", port), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FakeVllm:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeVllm:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def hold_requests(self) -> None:
        self._release.clear()

    def release_requests(self) -> None:
        self._release.set()

    # --------------------------------------------------------------------------------------------- answers
    def models(self) -> dict[str, Any]:
        with self._lock:
            names = list(self.adapters)
        data = [{"id": self.model_name, "object": "model", "parent": None}]
        data += [{"id": name, "object": "model", "parent": self.model_name} for name in names]
        return {"object": "list", "data": data}

    def load(self, body: dict[str, Any]) -> tuple[int, Any]:
        name, path = body.get("lora_name"), body.get("lora_path")
        if self.refuse_loads is not None:
            return 400, _error(self.refuse_loads, 400)
        with self._lock:
            if name in self.adapters:
                return 400, _error(f"The lora adapter '{name}' has already been loaded.", 400)
            if not isinstance(path, str) or not (Path(path) / "adapter_config.json").is_file():
                return 400, _error(f"No adapter found for {path}", 400)
            self.adapters[str(name)] = path
            self.loads.append(str(name))
        return 200, f"Success: LoRA adapter '{name}' added successfully."

    def unload(self, body: dict[str, Any]) -> tuple[int, Any]:
        name = body.get("lora_name")
        with self._lock:
            if name not in self.adapters:
                return 404, _error(f"The lora adapter '{name}' cannot be found.", 404)
            del self.adapters[str(name)]
            self.unloads.append(str(name))
        return 200, f"Success: LoRA adapter '{name}' removed successfully."

    def chat(self, body: dict[str, Any]) -> tuple[int, Any]:
        model = body.get("model")
        with self._lock:
            known = model == self.model_name or model in self.adapters
            self.chat_models.append(str(model))
        if not known:
            return 404, _error(f"The model `{model}` does not exist.", 404)
        self.in_flight.release()
        self._release.wait(timeout=60)
        forwarded = json.dumps({**body, "model": self.backend_model}).encode()
        request = urllib.request.Request(
            f"{self.backend}/chat/completions", data=forwarded, headers={"content-type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                answer = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"{}")
        answer["model"] = model
        return 200, answer

    def dev(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        if not self.dev_mode:
            return 404, _error(f"no route {path}", 404)
        if path.startswith("/pause"):
            self.dev_calls.append("pause")
        elif path == "/resume":
            self.dev_calls.append("resume")
        else:
            kwargs = body.get("kwargs") or {}
            if body.get("method") != "reload_weights" or not Path(str(kwargs.get("weights_path"))).is_dir():
                return 400, _error(f"cannot reload weights from {kwargs.get('weights_path')!r}", 400)
            self.dev_calls.append("reload")
            self.reloads.append(str(kwargs["weights_path"]))
        return 200, {}


def _error(message: str, code: int) -> dict[str, Any]:
    return {"error": {"message": message, "type": "BadRequestError" if code == 400 else "NotFoundError", "code": code}}


def _handler(fake: FakeVllm) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return None

        def _send(self, status: int, payload: Any) -> None:
            text = payload if isinstance(payload, str) else json.dumps(payload)
            raw = text.encode()
            self.send_response(status)
            self.send_header("content-type", "text/plain" if isinstance(payload, str) else "application/json")
            self.send_header("content-length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_GET(self) -> None:
            if self.path == "/health":
                self._send(200, "")
            elif self.path == "/v1/models":
                self._send(200, fake.models())
            else:
                self._send(404, _error(f"no route {self.path}", 404))

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            routes = {
                "/v1/load_lora_adapter": fake.load,
                "/v1/unload_lora_adapter": fake.unload,
                "/v1/chat/completions": fake.chat,
            }
            if self.path in ("/pause?mode=wait", "/resume", "/collective_rpc"):
                self._send(*fake.dev(self.path, body))
                return
            route = routes.get(self.path)
            if route is None:
                self._send(404, _error(f"no route {self.path}", 404))
                return
            self._send(*route(body))

    return Handler


def _serve_cli(argv: list[str]) -> int:
    """`serve <folder> --port N --served-model-name M [...]`: the tiny model in <folder> behind a FakeVllm."""
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("verb", choices=["serve"])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--served-model-name", required=True)
    known, _ = parser.parse_known_args(argv)
    if not (known.folder / "config.json").is_file():
        print(f"ValueError: {known.folder} is not a model folder (no config.json)", flush=True)
        return 1
    from agentlightning.inference.engine import InferenceEngine
    from agentlightning.inference.server import InferenceServer

    engine = InferenceEngine.from_pretrained(known.folder, device="cpu")
    with InferenceServer(engine) as backend:
        fake = FakeVllm(backend.endpoint, engine.model_name, model_name=known.served_model_name, port=known.port)
        fake.start()
        print(f"fake vLLM serving {known.folder} on port {known.port}", flush=True)
        threading.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(_serve_cli(sys.argv[1:]))
