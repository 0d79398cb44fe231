"""The tutorial every user sees: "Tutorial: MNIST on one GPU", a job template of their own.

A job counts as the tutorial when it runs the tutorial's image and command (`is_tutorial_job`);
its grant comes when the mirror records it COMPLETED with exit code 0. With PyTorch in the
image (production, pyxis) it trains a small MNIST classifier for one epoch and fails below
90 % test accuracy; where the job runs without a container and finds no PyTorch (the dev
cluster), it checks that it was given a GPU and says that it trained nothing.
"""

from __future__ import annotations

from jobs.models import JobTemplate

TEMPLATE_NAME = "Tutorial: MNIST on one GPU"

TUTORIAL_COMMAND = r"""echo "Tutorial: MNIST on one GPU (GPU ${CUDA_VISIBLE_DEVICES:-none})"
test -n "${CUDA_VISIBLE_DEVICES:-}" || { echo "no GPU was allocated" >&2; exit 1; }
if command -v python3 >/dev/null && python3 -c 'import torch, torchvision' 2>/dev/null; then
python3 - <<'PY'
import torch, torch.nn as nn, torch.nn.functional as F
from torchvision import datasets, transforms
device = "cuda" if torch.cuda.is_available() else "cpu"
tf = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
train = torch.utils.data.DataLoader(datasets.MNIST("/tmp/mnist", True, tf, download=True), batch_size=128, shuffle=True)
test = torch.utils.data.DataLoader(datasets.MNIST("/tmp/mnist", False, tf, download=True), batch_size=1000)
model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10)).to(device)
optimiser = torch.optim.Adam(model.parameters(), lr=1e-3)
for images, labels in train:
    optimiser.zero_grad()
    F.cross_entropy(model(images.to(device)), labels.to(device)).backward()
    optimiser.step()
correct = sum((model(x.to(device)).argmax(1) == y.to(device)).sum().item() for x, y in test)
accuracy = correct / len(test.dataset)
print(f"test accuracy {accuracy:.3f}")
raise SystemExit(0 if accuracy >= 0.9 else 1)
PY
else
  echo "No PyTorch here (a job without a container): the GPU check passed; nothing was trained."
fi"""

TUTORIAL_SPEC = {
    "name": "mnist-tutorial",
    "image": "nvcr.io/nvidia/pytorch:24.05-py3",
    "gpu_type": "rtx4090",
    "gpu_count": 1,
    "command": TUTORIAL_COMMAND,
    "time_limit_minutes": 15,
    "data_mount": "",
    "environment": {},
}


def ensure_template(user_id: int) -> JobTemplate:
    template, _ = JobTemplate.objects.get_or_create(
        owner_id=user_id, name=TEMPLATE_NAME, defaults={"spec": TUTORIAL_SPEC}
    )
    return template


def is_tutorial_job(job) -> bool:
    spec = job.spec or {}
    return spec.get("command") == TUTORIAL_COMMAND and spec.get("image") == TUTORIAL_SPEC["image"]
