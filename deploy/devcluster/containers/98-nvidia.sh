#!/bin/bash
# deploy/devcluster/containers/98-nvidia.sh -- replaces enroot's NVIDIA hook on the dev cluster.
# NGC images set NVIDIA_VISIBLE_DEVICES=all, and the real hook (kept as 98-nvidia.sh.disabled)
# then needs nvidia-container-cli and a driver, neither of which exists here (the GPUs are fake
# character devices). CUDA_VISIBLE_DEVICES stays as Slurm set it; what the image asked for is
# recorded in the container's environment.
set -eu
if [ -n "${NVIDIA_VISIBLE_DEVICES:-}" ] && [ "${NVIDIA_VISIBLE_DEVICES}" != void ]; then
    echo "DEVCLUSTER_FAKE_GPU_HOOK=NVIDIA_VISIBLE_DEVICES=${NVIDIA_VISIBLE_DEVICES}" >>"${ENROOT_ENVIRON}"
fi
exit 0
