"""Submission: a job spec parsed and checked, its batch script, the plan quota, the checks higher
layers add, and the one path (intake) every new job takes."""
