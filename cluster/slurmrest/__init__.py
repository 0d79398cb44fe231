"""slurmrestd: one HTTP client, and one pure adapter per data_parser version."""
