"""Agents for the Trainer integration tests, at module level so runner processes can import them."""

from __future__ import annotations

from typing import Any

import agentlightning as agl


@agl.rollout
def rule_agent(task: dict[str, Any], prompt_template: agl.PromptTemplate) -> float:
    """Reward 1 when the prompt states the rule of the task's category (the scripted optimizer adds rules)."""
    rendered = prompt_template.format(**task)
    agl.emit_message(rendered)
    return 1.0 if f"Rule: {task['category']}." in rendered else 0.0


@agl.rollout
def rule_chat_agent(task: dict[str, Any], prompt_template: agl.PromptTemplate, llm: agl.LLM) -> float:
    """`rule_agent` that also asks its model (plain OpenAI SDK, captured by the Trainer's default tracer)."""
    from openai import OpenAI

    rendered = prompt_template.format(**task)
    OpenAI(base_url=llm.endpoint, api_key="unused", max_retries=0).chat.completions.create(
        model=llm.model, messages=[{"role": "user", "content": rendered}]
    )
    return 1.0 if f"Rule: {task['category']}." in rendered else 0.0
