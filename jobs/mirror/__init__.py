"""The mirror: Slurm's queue written into Job rows (the reading itself is cluster.job_reader)."""
