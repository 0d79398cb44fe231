"""Run a Django management command class as a script: the payload-capture tools live in
testing/ (they submit jobs with the tests' helpers), which is not an installed app, so
`manage.py` does not list them. `python -m testing.capture_slurm_payloads --help`."""

from __future__ import annotations

import os
import sys


def run_as_script(command_class) -> None:
    # Imported here: this module is imported before anything sets the portal up.
    from foundation.envfile import default_env_file, load_env_file

    load_env_file(default_env_file())  # var/dev.env, as manage.py does
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpupool.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command(command_class(), *sys.argv[1:])
