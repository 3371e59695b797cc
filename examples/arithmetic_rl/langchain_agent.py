"""The arithmetic agent written with LangChain instead of the OpenAI SDK (trained by `train_langchain.py`).

Plain LangChain (`ChatOpenAI`); nothing in it knows about training except the reward it returns.
"""

from __future__ import annotations

from typing import Any

from agent import messages_for, strict_correct

import agentlightning as agl


@agl.rollout
def langchain_arithmetic_agent(task: dict[str, Any], llm: agl.LLM) -> float:
    from langchain_openai import ChatOpenAI

    model = ChatOpenAI(
        base_url=llm.endpoint,
        api_key=llm.api_key or "unused",  # type: ignore[arg-type]
        model=llm.model,
        temperature=llm.sampling_parameters.get("temperature", 0.0),
        max_completion_tokens=12,
        max_retries=2,
    )
    answer = model.invoke([(m["role"], m["content"]) for m in messages_for(task)]).content
    return 1.0 if strict_correct(str(answer), task) else 0.0  # the reward: the only training-specific line
