from django.apps import AppConfig


class SweepsConfig(AppConfig):
    """Sweeps: grids of runs of one base job as Slurm job arrays, on top of jobs/ as interactive/ is.
    Their tables (Sweep, JobArray) stay jobs' own: a job's row names its array and sweep, and the
    mirror reads arrays as it reads jobs."""

    name = "sweeps"
    verbose_name = "Sweeps"

    def ready(self):
        from jobs.forms import register_sweep_form
        from sweeps import receivers  # noqa: F401
        from sweeps.forms import quote_or_submit

        register_sweep_form(quote_or_submit)
