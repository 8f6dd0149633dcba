"""The `hpcgrade` command, on top of everything: the client's commands (`login`, `submit`,
`check`, `grade`), the deploy steps and accounts (`db`, `users`, `tokens`, `exercises`), the
cluster's (`slurm`, `pilot`, `sandbox`) and `demo`."""
