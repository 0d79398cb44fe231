"""Loaded by pytest before Django (`-p testing.pytest_env` in pyproject.toml): every pytest run
has settings of its own, whatever the shell exported or left out. DEBUG on (no secret key
needed), a Redis database that `make dev` never uses, the test submit limits: what
scripts/test.sh sets too."""

import os
import tempfile

os.environ.setdefault("DEBUG", "1")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/13")
os.environ.setdefault("EMAIL_BACKEND", "django.core.mail.backends.locmem.EmailBackend")
# Tests submit many jobs from one address; the limits themselves are tested with their own settings.
os.environ.setdefault("SUBMIT_RATE_LIMIT_PER_MINUTE", "10000")
os.environ.setdefault("SUBMIT_RATE_LIMIT_PER_IP_PER_MINUTE", "10000")
os.environ.setdefault("SUBMIT_RETRY_MAX_SECONDS", "3")
os.environ.setdefault("CLUSTER_SYNC_INTERVAL_SECONDS", "1")
# Datasets' uploads never go to the dev cluster's tree from a test (the default DATASET_STORE);
# datasets' own tests give each test a directory of its own.
os.environ.setdefault("DATASET_STORE", os.path.join(tempfile.gettempdir(), f"gpupool-test-datasets-{os.getuid()}"))
# Test users' passwords hashed in 1,000 rounds, not Django's million (gpupool/settings.py, DEBUG
# only): half a second of CPU per user created or signed in was most of the suite's time.
os.environ.setdefault("PASSWORD_PBKDF2_ITERATIONS", "1000")
# Plain static names: a manifest exists only after collectstatic, which one test runs itself.
os.environ.setdefault("STATIC_HASHED", "0")
os.environ.setdefault("WHITENOISE_USE_FINDERS", "1")
