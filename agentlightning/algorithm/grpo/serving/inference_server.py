"""How the policy being trained is served: the local inference engine in this process, or a separate server.

In-process (`LocalServing`): the GRPO algorithm starts an `InferenceServer` around an `InferenceEngine` and swaps
new weights into it in place with `load_weights(state_dict, version)`, between steps, without a restart; when the
policy trains the engine's own tensors (`Policy.shared`, see `learning/shared_base.py`) there is nothing to copy: the LoRA
delta is merged into them and the engine told the new version.
Separate process (`RemoteServing`): new weights are saved as a standard Hugging Face folder and the server is told
to load them with `POST /v1/weights {"path": ..., "version": ...}` (it must see the same file system).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from .base import ServingError

if TYPE_CHECKING:
    from agentlightning.inference.engine import InferenceEngine
    from agentlightning.inference.server import InferenceServer

    from ..learning.policy import Policy
    from ..learning.shared_base import SharedBase

__all__ = ["LocalServing", "RemoteServing"]

logger = logging.getLogger(__name__)


class LocalServing:
    """An `InferenceServer` on loopback in this process; weights are swapped into its engine in place."""

    def __init__(
        self, engine: InferenceEngine, server: Optional[InferenceServer] = None, *, shared: Optional[SharedBase] = None
    ) -> None:
        if shared is not None and shared.engine is not engine:
            raise ValueError("LocalServing: the shared policy weights belong to another engine")
        self.engine = engine
        self._server = server
        self._owned = server is None
        self._shared = shared
        self.endpoint = server.endpoint if server is not None else ""
        self.model_name = engine.model_name

    def start(self) -> None:
        if self._server is None:
            from agentlightning.inference.server import InferenceServer

            self._server = InferenceServer(self.engine).start()
        self.endpoint = self._server.endpoint

    def publish(self, policy: Policy, version: str) -> None:
        shared = getattr(policy, "shared", None)
        if shared is not None and shared.engine is self.engine:
            shared.serve(version)  # the engine serves the policy's own tensors: merge LoRA in, nothing to copy
            return
        with policy.merged_weights() as weights:  # copied into the engine in place: no third copy of the model
            self.engine.load_weights(weights, version)

    def stop(self) -> None:
        if self._shared is not None:
            self._shared.resume()  # a run stopped between an update and its publish leaves no engine paused
        if self._owned and self._server is not None:
            self._server.stop()
            self._server = None


class RemoteServing:
    """A server in another process (`agl serve`): new weights go through a folder and `POST /v1/weights`."""

    def __init__(
        self, endpoint: str, publish_dir: Path, *, model_name: Optional[str] = None, api_key: Optional[str] = None
    ):
        self.endpoint = endpoint.rstrip("/")
        if not self.endpoint.endswith("/v1"):
            self.endpoint += "/v1"
        self.publish_dir = publish_dir
        self.api_key = api_key
        self.model_name = model_name or ""
        self._current: Optional[Path] = None

    def _request(self, method: str, path: str, body: Optional[dict[str, Any]] = None, timeout: float = 600.0) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.endpoint + path, data=data, method=method)
        request.add_header("content-type", "application/json")
        if self.api_key:
            request.add_header("authorization", f"Bearer {self.api_key}")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:500]
            raise ServingError(f"{method} {self.endpoint}{path} failed with HTTP {exc.code}: {detail}") from exc
        except (urllib.error.URLError, OSError) as exc:
            raise ServingError(f"The inference server at {self.endpoint} is unreachable: {exc}") from exc

    def start(self) -> None:
        models = self._request("GET", "/models", timeout=30.0)
        names = [entry.get("id") for entry in (models or {}).get("data", []) if isinstance(entry, dict)]
        if not names:
            raise ServingError(f"The inference server at {self.endpoint} serves no model")
        if not self.model_name:
            self.model_name = str(names[0])
        elif self.model_name not in names:
            raise ServingError(f"The inference server at {self.endpoint} does not serve {self.model_name!r} ({names})")

    def publish(self, policy: Policy, version: str) -> None:
        self.publish_dir.mkdir(parents=True, exist_ok=True)
        staging = self.publish_dir / f".{version}.partial"
        target = self.publish_dir / version
        shutil.rmtree(staging, ignore_errors=True)
        policy.save_merged(staging)
        shutil.rmtree(target, ignore_errors=True)
        os.replace(staging, target)
        self._request("POST", "/weights", {"path": str(target.resolve()), "version": version})
        previous, self._current = self._current, target
        if previous is not None and previous != target:
            shutil.rmtree(previous, ignore_errors=True)

    def stop(self) -> None:
        return None
