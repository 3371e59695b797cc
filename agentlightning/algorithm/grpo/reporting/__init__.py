"""What a GRPO run records and tells: each step's history entry and log lines (`step_log`, `agent_history`), greedy
evaluation reports (`evaluation`), the run's health records, warnings and verdict (`health`, `health_rules`,
`health_log`, `health_verdict`, `health_store`) and experiment tracking (`tracking`)."""
