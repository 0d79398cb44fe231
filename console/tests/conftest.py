import pytest


@pytest.fixture
def canary_submissions(admin_user, monkeypatch):
    """The admin with a cluster account (the canary runs as one), and each canary run's job
    submissions recorded as (run id, nodes) instead of made: for tests without Slurm."""
    from console.actions import canary

    admin_user.profile.cluster_username = "ada"
    admin_user.profile.save()
    submitted = []
    monkeypatch.setattr(canary, "_submit_checks", lambda run, nodes: submitted.append((run.pk, nodes)))
    return submitted
