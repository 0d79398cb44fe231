"""What Slurm says, as values: the types every reader returns, accounting records and their
arithmetic, GRES and TRES strings, array ids, host lists, the job reader and queries."""
