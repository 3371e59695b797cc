"""An agent written with the plain OpenAI SDK and nothing else (module level, so runner processes import it)."""

from __future__ import annotations

from typing import Any

import agentlightning as agl


@agl.rollout
def plain_openai_agent(task: dict[str, Any], llm: agl.LLM) -> float:
    from openai import OpenAI  # imported inside the rollout, as many agents do

    reply = OpenAI(base_url=llm.endpoint, api_key="unused", max_retries=0).chat.completions.create(
        model=llm.model, messages=[{"role": "user", "content": task["q"]}]
    )
    return float(bool(reply.choices[0].message.content))
