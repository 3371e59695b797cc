"""vLLM as GRPO's rollout engine: a vLLM OpenAI server started here (a subprocess) or given by URL.

New weights reach vLLM without a restart:
- LoRA (`lora_rank` set): each step's adapter is saved to `publish_dir/<version>` and loaded at runtime under a new
  name (`<model name>@<version>`, `POST /v1/load_lora_adapter`; the server needs `--enable-lora` and
  `VLLM_ALLOW_RUNTIME_LORA_UPDATING=True`, which a server started here gets). `upstream_model` then names the newest
  adapter, and GRPO points the proxy's route for the agent's model name at it. The previous adapter stays loaded one
  more version, so a request that was routed to it before the swap finishes on it (its span's request records the
  adapter name, hence the version); older adapters are unloaded and their folders deleted.
- Several agents (`publish_agents`, one LoRA adapter each): every agent's adapter is saved to
  `publish_dir/<agent>/<version>` and loaded as `<agent>@<version>`; `agent_upstream(agent)` names the agent's newest
  adapter (the base model before its first publish), and each agent keeps its previous adapter loaded one more
  version, older ones unloaded, as above. A server started here gets `--max-loras` of twice the agents (each agent's
  newest and previous adapter batch together); one given by URL with fewer still serves them all (vLLM keeps at most
  `--max-loras` adapters active and reloads others from their folders), but requests for more distinct adapters than
  that wait for each other.
- Full fine-tune, or LoRA with `publish="merged"`: the merged weights are saved to `publish_dir/<version>` and vLLM
  re-reads them in place
  (`POST /collective_rpc {"method": "reload_weights", "kwargs": {"weights_path": ...}}`), after pausing generation
  until the requests in flight have finished (`POST /pause?mode=wait`, then `/resume`), so no request mixes two
  versions. Both routes exist only in vLLM's dev mode (`VLLM_SERVER_DEV_MODE=1`, which a server started here gets).
  A LoRA policy published merged costs a save of the whole model per step instead of the adapter's, and spares vLLM
  the LoRA computation on every token: on vLLM-CPU (whose LoRA kernels are slow) that is the faster choice.

The server process (its command line, its process group, its log) is `vllm_process`'s.

Every failure (vLLM missing, unreachable, a model folder it cannot load, an adapter or a reload refused) raises
`ServingError` naming what and where; GRPO stops on it.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Optional, Union

from .base import PolicyFactory, ServingError
from .options import VLLM_OPTIONS
from .vllm_process import (
    LOG_TAIL_LINES,
    VLLM_COMMAND_ENV,
    die_with_parent,
    free_port,
    known_exit_cause,
    log_tail,
    serve_command,
    stop_group,
    vllm_command,
)

if TYPE_CHECKING:
    from ..config import GRPOConfig
    from ..learning.agent_policy import AgentPolicies
    from ..learning.policy import Policy

__all__ = [
    "PUBLISH_MODES",
    "VLLM_COMMAND_ENV",
    "VllmServing",
    "adapter_name",
    "build_vllm_serving",
    "check_vllm_options",
    "save_adapter",
    "serve_command",
    "vllm_command",
]

logger = logging.getLogger(__name__)


def adapter_name(model_name: str, version: str) -> str:
    """The name the adapter of one weights version is loaded under (the version is readable from it)."""
    return f"{model_name}@{version}"


class VllmServing:
    """GRPO's `Serving` backed by a vLLM OpenAI-compatible server (see the module docstring).

    Args:
        model_path: the Hugging Face model folder the policy is trained from; a server started here serves it. A
            server given by `url` must serve the same weights.
        publish_dir: where adapters (or a full fine-tune's weights) are written; vLLM must see this path.
        lora: the policy trains LoRA adapters (True) or all weights (False).
        publish: how a LoRA policy's weights reach vLLM: "adapter" (loaded at runtime as a LoRA adapter, the
            default) or "merged" (merged into the base weights and reloaded in place, as a full fine-tune's are).
        url: an already running vLLM server (`http://host:port` or `.../v1`); None starts one here.
        command: vLLM's CLI, or the Python interpreter of its venv (default: `$AGL_VLLM_COMMAND`, else `vllm` on
            the PATH).
        args: extra `vllm serve` arguments (e.g. `["--dtype", "bfloat16", "--max-model-len", "2048"]`).
        model_name: the name agents call the model by (default: the folder's name; with `url`, the server's first
            base model).
        max_lora_rank: `--max-lora-rank` of a server started here (at least the trained rank).
        max_loras: `--max-loras` of a server started here (adapters batched together: 2 per trained policy).
        api_key: the server's API key (`--api-key` of a server started here).
        startup_timeout: seconds to wait for a started server to become healthy.
        log_path: where a started server's output goes (default: `publish_dir/../vllm.log`).
        env: extra environment variables for a started server (e.g. `VLLM_CPU_KVCACHE_SPACE`).
    """

    def __init__(
        self,
        model_path: Path,
        publish_dir: Path,
        *,
        lora: bool,
        publish: str = "adapter",
        url: Optional[str] = None,
        command: Union[str, Sequence[str], None] = None,
        args: Sequence[str] = (),
        model_name: Optional[str] = None,
        max_lora_rank: int = 16,
        max_loras: int = 2,
        api_key: Optional[str] = None,
        startup_timeout: float = 900.0,
        log_path: Optional[Path] = None,
        env: Optional[dict[str, str]] = None,
    ) -> None:
        self.model_path = Path(model_path)
        self.publish_dir = Path(publish_dir)
        _check_publish(publish)
        self.lora = lora and publish == "adapter"  # True: adapters are loaded at runtime; False: weights reloaded
        self.url = url
        self.command = command
        self.args = list(args)
        self.model_name = model_name or ("" if url is not None else self.model_path.name)
        self.upstream_model = self.model_name
        self.max_lora_rank = max_lora_rank
        self.max_loras = max_loras
        self.api_key = api_key
        self.startup_timeout = startup_timeout
        self.log_path = Path(log_path) if log_path is not None else self.publish_dir.parent / "vllm.log"
        self.env = dict(env or {})
        self.endpoint = _v1(url) if url is not None else ""
        self.adapters: list[str] = []  # loaded adapter names, oldest first (at most the newest two stay loaded)
        self.agent_adapters: dict[str, list[str]] = {}  # the same per agent, with several agents
        self._folders: dict[str, Path] = {}  # each loaded adapter's folder (deleted when it is unloaded)
        self.version = "base"
        self._process: Optional[subprocess.Popen[bytes]] = None
        self._full_folder: Optional[Path] = None
        self._log: Optional[IO[bytes]] = None

    # ------------------------------------------------------------------------------------------------ HTTP
    def _request(self, method: str, path: str, body: Optional[dict[str, Any]] = None, timeout: float = 600.0) -> Any:
        """`path` relative to the server root (`/health`, `/v1/models`); JSON in and out."""
        root = self.endpoint[: -len("/v1")]
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(root + path, data=data, method=method)
        request.add_header("content-type", "application/json")
        if self.api_key:
            request.add_header("authorization", f"Bearer {self.api_key}")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:800]
            raise ServingError(f"vLLM at {root}: {method} {path} failed with HTTP {exc.code}: {detail}") from exc
        except (urllib.error.URLError, OSError) as exc:
            raise ServingError(f"vLLM at {root} is unreachable ({method} {path}): {exc}") from exc
        try:
            return json.loads(raw) if raw.strip() else None
        except ValueError:
            return raw.decode(errors="replace")  # vLLM answers adapter loads with plain text

    # ---------------------------------------------------------------------------------------------- lifecycle
    def start(self) -> None:
        if self.url is None:
            self._launch()
        models = self._request("GET", "/v1/models", timeout=30.0)
        entries = [entry for entry in (models or {}).get("data", []) if isinstance(entry, dict)]
        bases = [str(entry.get("id")) for entry in entries if not entry.get("parent")]
        if not bases:
            raise ServingError(f"vLLM at {self.endpoint} serves no model")
        if not self.model_name:
            self.model_name = bases[0]
        elif self.model_name not in bases:
            raise ServingError(f"vLLM at {self.endpoint} does not serve {self.model_name!r} (it serves {bases})")
        self.upstream_model = self.model_name

    def launch_command(self, port: int) -> tuple[list[str], dict[str, str]]:
        """The command line and the environment of a server started here, listening on `port`."""
        base = vllm_command(self.command)
        command = [
            *serve_command(base, self.model_path.resolve()),
            "--host", "127.0.0.1", "--port", str(port),
            "--served-model-name", self.model_name,
            "--generation-config", "vllm",  # no sampling defaults from the folder: requests say what they want
        ]  # fmt: skip
        env = {**os.environ, **self.env}
        # vLLM-CPU otherwise claims 92% of the machine's memory for its KV cache and refuses to start when less is
        # free; 1 GiB holds ~23,000 tokens of SmolLM2 (a GPU build ignores the variable).
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
        if self.lora:
            command += ["--enable-lora", "--max-lora-rank", str(self.max_lora_rank), "--max-loras", str(self.max_loras)]
            env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] = "True"
        else:
            env["VLLM_SERVER_DEV_MODE"] = "1"  # /collective_rpc and /pause, for the in-place reload
        if self.api_key:
            command += ["--api-key", self.api_key]
        if not any(arg.split("=", 1)[0] == "--logprobs-mode" for arg in self.args):
            # the log-probs of the distribution sampled from (at the request's temperature), which the training's
            # sampler/trainer gap compares with its own (vLLM's default reports the raw logits' log-probs)
            command += ["--logprobs-mode", "processed_logprobs"]
        command += self.args
        return command, env

    def _launch(self) -> None:
        port = free_port()
        command, env = self.launch_command(port)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        logger.info("Starting vLLM: %s (log: %s)", shlex.join(command), self.log_path)
        try:
            self._process = subprocess.Popen(
                command,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # its engine and worker processes are stopped with it, as one group
                preexec_fn=die_with_parent if sys.platform == "linux" else None,
            )
        except OSError as exc:
            self.stop()
            raise ServingError(f"Could not start vLLM ({shlex.join(command)}): {exc}") from exc
        self.endpoint = f"http://127.0.0.1:{port}/v1"
        self._wait_until_healthy()

    def _wait_until_healthy(self) -> None:
        assert self._process is not None
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            code = self._process.poll()
            if code is not None:
                self._process = None
                self.stop()
                tail = self.log_tail()
                cause = known_exit_cause(tail) or "It cannot load the model folder, or its arguments are wrong. "
                raise ServingError(
                    f"vLLM exited with code {code} while loading {self.model_path}. {cause}The end of its log "
                    f"{self.log_path}:\n{tail}"
                )
            try:
                self._request("GET", "/health", timeout=5.0)
                return
            except ServingError:
                time.sleep(1.0)
        self.stop()
        raise ServingError(
            f"vLLM was not healthy within {self.startup_timeout:.0f} s; the end of its log {self.log_path}:\n"
            f"{self.log_tail()}"
        )

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last lines of a started server's log, after its root cause when that is further up (`log_tail`)."""
        return log_tail(self.log_path, lines)

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            stop_group(process)
        if self._log is not None:
            self._log.close()
            self._log = None

    # ----------------------------------------------------------------------------------------------- weights
    def publish(self, policy: Policy, version: str) -> None:
        if self.lora:
            self._publish_adapter(policy, version)
        else:
            self._publish_full(policy, version)
        self.version = version

    def publish_agents(self, policies: AgentPolicies, version: str) -> None:
        """Every agent's adapter of `version`, loaded as `<agent>@<version>` (see the module docstring)."""
        if not self.lora:
            raise ServingError("One adapter per agent needs a LoRA serving (lora_rank set)")
        for agent in policies.agents:
            loaded = self.agent_adapters.setdefault(agent, [])

            def save(path: Path, agent: str = agent) -> None:
                policies.save_adapter(agent, path)

            self._load(adapter_name(agent, version), self.publish_dir / agent / version, save, loaded, agent=agent)
        self.version = version

    def agent_upstream(self, agent: str) -> str:
        """The upstream model of agent `agent`'s calls: its newest adapter, or the base model before its first one."""
        loaded = self.agent_adapters.get(agent)
        return loaded[-1] if loaded else self.model_name

    def _write(self, folder: Path, save: Callable[[Path], None]) -> Path:
        """`save` into a staging folder next to `folder`, renamed to `folder` once complete."""
        staging = folder.with_name(f".{folder.name}.partial")
        folder.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(staging, ignore_errors=True)
        save(staging)
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(staging, folder)
        return folder

    def _publish_adapter(self, policy: Policy, version: str) -> None:
        name = adapter_name(self.model_name, version)
        self._load(name, self.publish_dir / version, lambda path: save_adapter(policy, path), self.adapters)
        self.upstream_model = name

    def _load(
        self, name: str, folder: Path, save: Callable[[Path], None], loaded: list[str], agent: Optional[str] = None
    ) -> None:
        """Write an adapter to `folder` and load it as `name`; `loaded` (its lineage, oldest first) keeps it and the
        one before it: requests routed to that one before the swap finish on it. Older ones are unloaded."""
        if name in loaded:  # the same version again (a resumed run): replace it
            self._unload(name, loaded)
        folder = self._write(folder, save)
        body = {"lora_name": name, "lora_path": str(folder.resolve())}
        try:
            try:
                self._request("POST", "/v1/load_lora_adapter", body)
            except ServingError as exc:
                if "already been loaded" not in str(exc):
                    raise
                # A server given by URL still holds this name from an earlier run (or the run before a resume):
                # the folder now holds other weights, loaded anew under a fresh id (no stale prefix cache).
                logger.info("vLLM already holds a LoRA adapter named %s: replacing it", name)
                self._unload(name, [], keep_folder=True)
                self._request("POST", "/v1/load_lora_adapter", body)
        except ServingError as exc:
            whose = f" of agent {agent!r}" if agent is not None else ""
            raise ServingError(
                f"vLLM refused the LoRA adapter {name!r}{whose} from {folder}: {exc}. The server needs --enable-lora, "
                f"--max-lora-rank >= the trained rank, and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True"
            ) from exc
        self._folders[name] = folder
        loaded.append(name)
        for old in loaded[:-2]:
            self._unload(old, loaded)

    def _unload(self, name: str, loaded: list[str], *, keep_folder: bool = False) -> None:
        try:
            self._request("POST", "/v1/unload_lora_adapter", {"lora_name": name})
        except ServingError as exc:
            logger.warning("Could not unload the LoRA adapter %s from vLLM: %s", name, exc)
        if name in loaded:
            loaded.remove(name)
        folder = self._folders.pop(name, None)
        if folder is not None and not keep_folder:
            shutil.rmtree(folder, ignore_errors=True)

    def _publish_full(self, policy: Policy, version: str) -> None:
        folder = self._write(self.publish_dir / version, policy.save_merged)
        try:
            self._request("POST", "/pause?mode=wait", timeout=600.0)  # requests in flight finish on the old weights
        except ServingError as exc:
            raise ServingError(
                f"vLLM cannot pause for a weight reload ({exc}); a full fine-tune needs its dev-mode routes: start "
                "it with VLLM_SERVER_DEV_MODE=1 (a server GRPO starts has it), or train LoRA (lora_rank=...)"
            ) from exc
        try:
            body = {"method": "reload_weights", "kwargs": {"weights_path": str(folder.resolve())}, "timeout": 600.0}
            self._request("POST", "/collective_rpc", body, timeout=660.0)
        except ServingError as exc:
            raise ServingError(f"vLLM could not reload the weights of {version} from {folder}: {exc}") from exc
        finally:
            self._request("POST", "/resume", timeout=60.0)
        previous, self._full_folder = self._full_folder, folder
        if previous is not None and previous != folder:
            shutil.rmtree(previous, ignore_errors=True)


def save_adapter(policy: Policy, folder: Path) -> None:
    """The PEFT adapter alone (adapter_config.json + adapter_model.safetensors), as vLLM loads it."""
    if not policy.lora:
        raise ServingError("save_adapter needs a LoRA policy")
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    policy.model.save_pretrained(str(folder), safe_serialization=True)


def _v1(url: str) -> str:
    url = url.rstrip("/")
    return url if url.endswith("/v1") else url + "/v1"


PUBLISH_MODES = ("adapter", "merged")


def _check_publish(publish: object) -> None:
    if publish not in PUBLISH_MODES:
        raise ValueError(f"vllm publish must be one of {list(PUBLISH_MODES)}, got {publish!r}")


def check_vllm_options(options: dict[str, Any]) -> dict[str, Any]:
    """GRPO's `vllm=` options, checked by name and type (a TypeError / ValueError names the bad one)."""
    unknown = sorted(set(options) - VLLM_OPTIONS)
    if unknown:
        raise TypeError(f"Unknown GRPO vllm option(s) {unknown}; known: {sorted(VLLM_OPTIONS)}")
    url = options.get("url")
    if url is not None and (not isinstance(url, str) or not url.startswith(("http://", "https://"))):
        raise ValueError(f"vllm url must be an http(s) URL, got {url!r}")
    args = options.get("args", ())
    if isinstance(args, str) or not all(isinstance(a, str) for a in args):
        raise ValueError(f"vllm args must be a list of strings, got {args!r}")
    _check_publish(options.get("publish", "adapter"))
    timeout = options.get("startup_timeout", 900.0)
    if not isinstance(timeout, (int, float)) or timeout <= 0:
        raise ValueError(f"vllm startup_timeout must be a positive number of seconds, got {timeout!r}")
    return dict(options)


def build_vllm_serving(
    model_path: Optional[Path],
    output_dir: Optional[Path],
    config: GRPOConfig,
    options: dict[str, Any],
    make: PolicyFactory,
) -> tuple[Policy, VllmServing]:
    """The policy built by `make` from `model_path` (default the embedded SmolLM2's folder; one policy, or one LoRA
    adapter per agent on it) and the vLLM serving of it."""
    options = dict(options)
    if model_path is None:
        from agentlightning.inference.model_files import DEFAULT_MODEL_NAME, ensure_converted

        model_path = ensure_converted()
        options.setdefault("model_name", DEFAULT_MODEL_NAME)
    policy = make.from_pretrained(model_path, config)
    if output_dir is not None:
        publish_dir = output_dir / "published"
    else:
        publish_dir = Path(tempfile.mkdtemp(prefix="agl-grpo-vllm-")) / "published"
    rank = config.lora_rank or 0
    serving = VllmServing(
        model_path,
        publish_dir,
        lora=config.lora_rank is not None,
        max_lora_rank=max(16, rank),
        max_loras=2 * make.adapter_count,  # each policy's newest and previous adapter
        **options,
    )
    return policy, serving
