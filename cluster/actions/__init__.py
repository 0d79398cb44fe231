"""The cluster app's writes of its own tables, atomic: the nodes of the own cluster (mirror) and
of the further clusters (further_nodes), read from Slurm."""
