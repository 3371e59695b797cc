"""How the policy being trained is served to the agents: what a serving does (`base`), the Agent Lightning inference
server in this process or by URL (`inference_server`), vLLM (`vllm`, `vllm_process`), the choice among them from
GRPO's arguments (`build`) and the LLM proxy's routes to what is served (`routing`)."""
