"""What a GRPO run trains and samples from: the policy (one model, or one LoRA adapter per agent on one base model)
and its serving (the in-process inference engine, a separate server by URL, or vLLM), chosen from GRPO's arguments."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union

from ..config import GRPOConfig
from .base import PolicyFactory
from .options import VllmOptions, option_dict
from .vllm import build_vllm_serving, check_vllm_options

if TYPE_CHECKING:
    from agentlightning.inference.engine import InferenceEngine
    from agentlightning.inference.server import InferenceServer

    from ..learning.policy import Policy
    from .base import Serving

__all__ = ["Built", "ServingChoice", "build_policy_and_serving", "choose_serving"]


@dataclass(frozen=True)
class ServingChoice:
    """What serves the policy and what it is trained from, from GRPO's arguments (checked by `choose_serving`)."""

    kind: str  # "local" (our inference server, in this process or separate by `server_url`) or "vllm"
    model_path: Optional[Path]  # the folder the policy is trained from (None: the engine's model, or the embedded one)
    output_dir: Optional[Path]
    engine: Optional[InferenceEngine]  # the in-process engine given (or the given server's)
    server: Optional[InferenceServer]
    server_url: Optional[str]
    vllm: dict[str, Any]  # the checked `vllm=` options


@dataclass
class Built:
    """The policy, its serving (not started yet) and what the run needs to know of them."""

    policy: Policy  # with several agents: the `AgentPolicies` (checkpoints use what both kinds have)
    serving: Serving
    engine: Optional[InferenceEngine] = None  # the in-process engine, when one serves
    serves_policy_weights: bool = False  # True when the served model is known to hold the policy's weights


def build_policy_and_serving(config: GRPOConfig, choice: ServingChoice, make: PolicyFactory, *, step: int) -> Built:
    """The policy `make` builds (one, or one LoRA adapter per agent) and its serving (`step` seeds the engine's
    sampling)."""
    model_path, output_dir, engine, server_url = choice.model_path, choice.output_dir, choice.engine, choice.server_url
    from .inference_server import LocalServing, RemoteServing

    if choice.kind == "vllm":
        # vLLM serves the folder the policy is loaded from (with several agents, each agent's calls go to the base
        # model until its first adapter is loaded: a fresh LoRA adapter changes nothing).
        policy, vllm = build_vllm_serving(model_path, output_dir, config, choice.vllm, make)
        return Built(policy, vllm, serves_policy_weights=True)
    if server_url is not None:
        assert model_path is not None and output_dir is not None
        return Built(make.from_pretrained(model_path, config), RemoteServing(server_url, output_dir / "published"))
    default_model = engine is None and model_path is None
    if engine is None:
        from agentlightning.inference.engine import InferenceEngine

        dtype = "bfloat16" if config.precision == "bfloat16" else "float32"
        engine = (
            InferenceEngine.from_pretrained(model_path, device=config.device, dtype=dtype)
            if model_path is not None
            else InferenceEngine.from_default(device=config.device, dtype=dtype)
        )
    if model_path is not None:
        policy, serves_policy_weights = make.from_pretrained(model_path, config), False
    else:
        policy, serves_policy_weights = make.from_engine(engine, config, default_model=default_model)
    engine.seed_sampling(f"{config.seed}:{step}")
    local = LocalServing(engine, choice.server, shared=getattr(policy, "shared", None))
    return Built(policy, local, engine, serves_policy_weights)


def choose_serving(
    model: Union[str, Path, None],
    *,
    engine: Optional[InferenceEngine],
    server: Optional[InferenceServer],
    server_url: Optional[str],
    serving: Optional[str],
    vllm: Union[VllmOptions, Mapping[str, Any], None],
    output_dir: Union[str, Path, None],
) -> ServingChoice:
    """GRPO's serving arguments, checked together (a ValueError / TypeError names what does not fit)."""
    if sum(x is not None for x in (engine, server, server_url)) > 1:
        raise ValueError("Pass at most one of engine, server and server_url")
    if serving not in (None, "local", "vllm"):
        raise ValueError(f"serving must be 'local' or 'vllm', got {serving!r}")
    if serving == "vllm" and (engine is not None or server is not None or server_url is not None):
        raise ValueError("serving='vllm' samples from vLLM: pass no engine, server or server_url with it")
    if vllm is not None and serving != "vllm":
        raise ValueError("vllm= options need serving='vllm'")
    options = check_vllm_options(option_dict(vllm, VllmOptions))
    if server_url is not None and model is None:
        raise ValueError("server_url needs model=<folder>: the trainer loads the policy from the same weights")
    if server_url is not None and output_dir is None:
        raise ValueError("server_url needs output_dir: new weights reach the server through files there")
    if model is not None and not (Path(model) / "config.json").is_file():
        raise ValueError(
            f"model={str(model)!r} is not a local Hugging Face model folder (no config.json there): GRPO trains "
            "from a folder on disk and downloads nothing; save the model there first (save_pretrained)"
        )
    return ServingChoice(
        kind=serving or "local",
        model_path=Path(model) if model is not None else None,
        output_dir=Path(output_dir) if output_dir is not None else None,
        engine=engine if engine is not None else (server.engine if server is not None else None),
        server=server,
        server_url=server_url,
        vllm=options,
    )
