"""Collecting a GRPO run's rollouts (`collector.RolloutCollector`, what the run loop uses): enqueueing them through the
store (`dispatch`), reading back each one's reward and LLM calls with their exact token ids (`reading`; split by agent
with several agents: `agents`), and what the LLM proxy recorded of each call (`proxy_calls`) with the checks of how it
was sampled (`sampling_check`, `call_checks`)."""
