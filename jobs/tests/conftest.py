GOOD_SPEC = {
    "name": "mnist",
    "image": "nvcr.io/nvidia/pytorch:24.05-py3",
    "gpu_type": "a100",
    "gpu_count": 1,
    "command": "echo hello from the job",
    "time_limit_minutes": 5,
}
