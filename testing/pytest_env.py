"""Loaded by pytest before Django (`-p testing.pytest_env` in pyproject.toml): every pytest run
has settings of its own, whatever the shell exported or left out. DEBUG on (no secret key
needed), and a Redis database that `make dev` never uses; scripts/test.sh sets the same."""

import os

os.environ.setdefault("DEBUG", "1")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/13")
os.environ.setdefault("EMAIL_BACKEND", "django.core.mail.backends.locmem.EmailBackend")
