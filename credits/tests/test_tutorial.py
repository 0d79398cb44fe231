"""The tutorial job does what it says with what its image has: run here as the job's command
(bash, python3 without PyTorch, as in the dev cluster's stand-in images), it trains a
classifier in plain Python and says so; without a GPU it fails. The pages name it as it is,
and an earlier tutorial's template becomes this one (a job of the earlier one still counts)."""

import hashlib
import importlib
import shutil
import subprocess

import pytest
from django.apps import apps
from django.test import Client

from credits import tutorial
from credits.tutorial import SUMMARY, TEMPLATE_NAME, TUTORIAL_COMMAND, TUTORIAL_SPEC, is_tutorial_job
from jobs.models import Job, JobTemplate


def _run(tmp_path, **env):
    # An image without PyTorch, whatever this machine has installed: `import torch` fails.
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("raise ImportError('not in this image')\n")
    return subprocess.run(
        ["bash", "-c", TUTORIAL_COMMAND],
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.skipif(shutil.which("python3", path="/usr/bin:/bin") is None, reason="no python3 in /usr/bin")
def test_without_pytorch_it_trains_in_plain_python_and_says_the_gpu_stayed_idle(tmp_path):
    done = _run(tmp_path, CUDA_VISIBLE_DEVICES="0")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:2] == ["Tutorial: a first job on one GPU", "Slurm allocated GPU 0 to this job."]
    assert "This image has no PyTorch: the GPU stays idle and the CPU does the exercise in plain Python." in lines
    trained = next(line for line in lines if line.startswith("Trained "))
    assert "a logistic regression in plain Python on the CPU on 2,000 generated points" in trained
    accuracy = float(lines[-1].split("accuracy ")[1].split(" ")[0])
    assert accuracy >= 0.9
    assert "MNIST" not in done.stdout and "nothing was trained" not in done.stdout


def test_without_a_gpu_it_fails_and_says_why(tmp_path):
    done = _run(tmp_path)
    assert done.returncode == 1 and "No GPU was allocated to this job." in done.stderr


def test_it_downloads_nothing():
    # A node need not reach the internet: no URL, no dataset download in the command.
    assert "http" not in TUTORIAL_COMMAND and "download" not in TUTORIAL_COMMAND


@pytest.mark.django_db
def test_the_pages_name_the_tutorial_as_it_is(alice):
    browser = Client()
    browser.force_login(alice)
    page = browser.get("/credits/").content.decode()
    template = JobTemplate.objects.get(owner=alice, name=TEMPLATE_NAME)
    assert f'<a href="/jobs/new/?template={template.pk}" data-tutorial-link>{TEMPLATE_NAME}</a>, {SUMMARY}' in page
    for address in ("/credits/", "/r/welcome", "/"):
        shown = browser.get(address)
        assert shown.status_code == 200 and "MNIST" not in shown.content.decode(), address
    browser.logout()
    for address in ("/r/welcome", "/"):  # the campaign's landing page, the public one
        shown = browser.get(address)
        assert shown.status_code == 200 and "MNIST" not in shown.content.decode(), address


@pytest.mark.django_db
def test_an_earlier_tutorials_template_becomes_this_one_and_its_jobs_still_count(alice, bob, monkeypatch):
    earlier = "echo an earlier tutorial"
    monkeypatch.setattr(tutorial, "RETIRED_COMMAND_SHA256", frozenset({hashlib.sha256(earlier.encode()).hexdigest()}))
    old_name = "Tutorial: MNIST on one GPU"
    old_spec = {**TUTORIAL_SPEC, "name": "mnist-tutorial", "command": earlier}
    JobTemplate.objects.filter(name=TEMPLATE_NAME).delete()
    JobTemplate.objects.create(owner=alice, name=old_name, spec=old_spec)
    JobTemplate.objects.create(owner=bob, name=old_name, spec={**old_spec, "command": "echo my own version"})
    migration = importlib.import_module("credits.migrations.0006_tutorial_without_download")
    migration.forward(apps, None)
    assert JobTemplate.objects.get(owner=alice, name=TEMPLATE_NAME).spec == TUTORIAL_SPEC
    assert not JobTemplate.objects.filter(owner=alice, name=old_name).exists()
    # One its owner changed stays theirs.
    assert JobTemplate.objects.get(owner=bob, name=old_name).spec["command"] == "echo my own version"
    assert not JobTemplate.objects.filter(owner=bob, name=TEMPLATE_NAME).exists()

    assert is_tutorial_job(Job(spec=old_spec)) and is_tutorial_job(Job(spec=TUTORIAL_SPEC))
    assert not is_tutorial_job(Job(spec={**old_spec, "command": "echo my own version"}))
    assert not is_tutorial_job(Job(spec={**TUTORIAL_SPEC, "image": "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime"}))
