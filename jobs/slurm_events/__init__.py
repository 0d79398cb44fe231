"""Slurm's events about jobs, as slurmctld's hooks send them (/api/v1/slurm/events): received
and marked (`asgi`), then applied to the mirror (`receiving`). An entry above the mirror: the
mirror itself knows nothing of it."""
