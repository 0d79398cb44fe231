"""Diagnosis: a failed job's log read for known failures (rules, explanations) and Slurm's
pending reasons in words a researcher understands."""
