"""What GRPO learns from a step's rollouts and how: group-relative advantages (`advantages`), the samples of a step
(`samples`, `agent_samples`), the clipped loss and its normaliser (`loss`, `normaliser`, `entropy`), the update on
its own thread (`update`, corrected for the sampler/trainer gap by `sampler_gap`), the policy being trained (`policy`,
`agent_policy`, `shared_base`) and its checkpoints (`checkpoint`)."""
