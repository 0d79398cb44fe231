"""The tutorial every user sees: "Tutorial: a first job on one GPU", a job template of their own.

A job counts as the tutorial when it runs the tutorial's image and command (`is_tutorial_job`);
its grant comes when the mirror records it COMPLETED with exit code 0. The job checks that
Slurm gave it a GPU, then trains a small classifier on points it generates itself (nothing is
downloaded: a node need not reach the internet) and fails below 90 % accuracy on held-out
points. What it trains with is what the image has, and it says which: with PyTorch (NVIDIA's
image in production) a small network on the GPU; without PyTorch (the dev cluster's stand-in
images carry Python alone) a logistic regression in plain Python on the CPU, saying that the
GPU stayed idle.
"""

from __future__ import annotations

import hashlib

from jobs.models import JobTemplate

TEMPLATE_NAME = "Tutorial: a first job on one GPU"
# What the pages say the tutorial does, true of either branch of the command below.
SUMMARY = (
    "a short job that checks it was given a GPU and trains a small classifier on generated points: "
    "on the GPU with PyTorch where the image has it, else in plain Python on the CPU"
)

TUTORIAL_COMMAND = r"""echo "Tutorial: a first job on one GPU"
test -n "${CUDA_VISIBLE_DEVICES:-}" || { echo "No GPU was allocated to this job." >&2; exit 1; }
echo "Slurm allocated GPU ${CUDA_VISIBLE_DEVICES} to this job."
command -v python3 >/dev/null || { echo "This image has no python3 to run the exercise with." >&2; exit 1; }
python3 - <<'PY'
# Tell points inside a circle from points outside it, learnt from generated examples.
import math
import random
import time

random.seed(7)


def sample(n):
    points = [(random.uniform(-1, 1), random.uniform(-1, 1)) for _ in range(n)]
    return points, [1 if x * x + y * y < 0.5 else 0 for x, y in points]


train_x, train_y = sample(2000)
test_x, test_y = sample(1000)
started = time.monotonic()
try:
    import torch
except ImportError:
    torch = None
if torch is not None:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    where = f"GPU {torch.cuda.get_device_name(0)}" if device == "cuda" else "CPU (PyTorch sees no GPU)"
    torch.manual_seed(7)
    inputs, labels = torch.tensor(train_x, device=device), torch.tensor(train_y, device=device)
    model = torch.nn.Sequential(torch.nn.Linear(2, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2)).to(device)
    optimiser = torch.optim.Adam(model.parameters(), lr=0.02)
    for _ in range(500):
        optimiser.zero_grad()
        torch.nn.functional.cross_entropy(model(inputs), labels).backward()
        optimiser.step()
    with torch.no_grad():
        predicted = model(torch.tensor(test_x, device=device)).argmax(1).tolist()
    how = f"a small neural network with PyTorch {torch.__version__} on the {where}"
else:
    print("This image has no PyTorch: the GPU stays idle and the CPU does the exercise in plain Python.")
    # Logistic regression on (x, y, x^2 + y^2), by gradient descent.
    features = [(x, y, x * x + y * y) for x, y in train_x]
    weights, bias, rate = [0.0, 0.0, 0.0], 0.0, 2.0
    for _ in range(300):
        grad_w, grad_b = [0.0, 0.0, 0.0], 0.0
        for f, label in zip(features, train_y):
            error = 1 / (1 + math.exp(-(bias + weights[0] * f[0] + weights[1] * f[1] + weights[2] * f[2]))) - label
            grad_b += error
            for i in range(3):
                grad_w[i] += error * f[i]
        bias -= rate * grad_b / len(features)
        weights = [w - rate * g / len(features) for w, g in zip(weights, grad_w)]
    predicted = [int(bias + weights[0] * x + weights[1] * y + weights[2] * (x * x + y * y) > 0) for x, y in test_x]
    how = "a logistic regression in plain Python on the CPU"
accuracy = sum(p == t for p, t in zip(predicted, test_y)) / len(test_y)
print(f"Trained {how} on {len(train_x):,} generated points in {time.monotonic() - started:.1f} s.")
print(f"It tells points inside the circle from outside ones: accuracy {accuracy:.3f} on {len(test_y):,} new points.")
raise SystemExit(0 if accuracy >= 0.9 else 1)
PY"""

TUTORIAL_SPEC = {
    "name": "gpu-tutorial",
    "image": "nvcr.io/nvidia/pytorch:24.05-py3",
    "gpu_type": "rtx4090",
    "gpu_count": 1,
    "command": TUTORIAL_COMMAND,
    "time_limit_minutes": 15,
    "data_mount": "",
    "environment": {},
}

# The commands of earlier tutorials, by their sha256: a job submitted from an earlier template
# before it was replaced still counts when it completes.
RETIRED_COMMAND_SHA256 = frozenset({"89553e3be625251b1fb57d93ce88694809ce4de1e1b2baef72ce6d2e433f1a76"})


def ensure_template(user_id: int) -> JobTemplate:
    template, _ = JobTemplate.objects.get_or_create(
        owner_id=user_id, name=TEMPLATE_NAME, defaults={"spec": TUTORIAL_SPEC}
    )
    return template


def command_sha256(command: str) -> str:
    return hashlib.sha256(command.encode()).hexdigest()


def is_tutorial_job(job) -> bool:
    spec = job.spec or {}
    command = spec.get("command")
    if spec.get("image") != TUTORIAL_SPEC["image"] or not isinstance(command, str):
        return False
    return command == TUTORIAL_COMMAND or command_sha256(command) in RETIRED_COMMAND_SHA256
