"""The mirror: Slurm's queue written into Job rows (the reading itself is cluster.records.job_reader)."""
