#!/usr/bin/env python
import os
import sys

if __name__ == "__main__":
    from foundation.envfile import default_env_file, load_env_file

    # `make dev` leaves var/dev.env (DEBUG and the emulator) so commands work as written.
    load_env_file(default_env_file())
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpupool.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
