import pytest


@pytest.fixture
def cleanup():
    """Names of Slurm reservations a test made (or a failed assertion would leave behind),
    deleted after it."""
    from cluster.clusters.services import slurm_cli

    names = []
    yield names
    cli = slurm_cli()
    for name in names:
        # Slurm refuses to delete a reservation a job still runs in (a failed test's job).
        cli.run("scancel", f"--reservation={name}", check=False)
        cli.delete_reservation(name, check=False)
