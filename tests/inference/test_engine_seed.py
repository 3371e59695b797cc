"""An engine seeded with `seed_sampling` draws the same samples for requests that bring no seed of their own."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from agentlightning.inference.sampling import SamplingParams  # noqa: E402
from agentlightning.inference.tiny import build_tiny_engine  # noqa: E402


def _sample(engine: object, seed: object) -> list[list[int]]:
    engine.seed_sampling(seed)  # type: ignore[attr-defined]
    torch.rand(5)  # other users of torch's global generator do not change the engine's samples
    params = SamplingParams(max_tokens=12, temperature=1.5, n=3, ignore_eos=True)
    return [state.token_ids for state in engine.generate([2, 10, 11], params)]  # type: ignore[attr-defined]


def test_a_seeded_engine_repeats_its_samples_and_another_seed_changes_them() -> None:
    engine = build_tiny_engine(seed=0)
    try:
        first, again, other = _sample(engine, 7), _sample(engine, 7), _sample(engine, 8)
    finally:
        engine.close()
    assert first == again
    assert first != other
