"""Usage: what runs used, metered from slurmdbd (GPU, GPU memory from telemetry, NVMe), reserved
time left unused, and the month's usage page."""
