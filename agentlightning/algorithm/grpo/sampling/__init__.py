"""Which tasks a GRPO step samples and how many rounds it runs: the task stream and when a run stops (`schedule`,
`balance`, `task_stream`), a step's sampling rounds until enough groups are informative (`rounds`), and when extra
rounds stop paying (`saturation`)."""
