"""The documented production environment passes Django's deployment checks, and turning
DEBUG off alone already makes cookies secure and sends HSTS."""

import os
import secrets
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "deploy" / "production.env.example"


def _documented_environment(tmp_path) -> dict[str, str]:
    env = {}
    for line in EXAMPLE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, value = line.partition("=")
            env[name] = value
    secret = tmp_path / "secret_key"
    secret.write_text(secrets.token_urlsafe(60))
    jwt_key = tmp_path / "jwt.key"
    jwt_key.write_bytes(secrets.token_bytes(32))
    env.update(SECRET_KEY_FILE=str(secret), SLURM_JWT_KEY_FILE=str(jwt_key), GPUPOOL_VAR_DIR=str(tmp_path / "var"))
    return env


def _run(args, env):
    base = {key: value for key, value in os.environ.items() if key in {"PATH", "HOME", "LANG"}}
    base["GPUPOOL_ENV_FILE"] = ""  # never a development env file left in the checkout
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=REPO, env={**base, **env}, capture_output=True, text=True, timeout=120
    )


def test_the_documented_production_environment_passes_check_deploy(tmp_path):
    result = _run(["check", "--deploy", "--fail-level", "WARNING"], _documented_environment(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr


def test_debug_off_alone_secures_cookies_and_sends_hsts(tmp_path):
    env = {"DEBUG": "0", "SECRET_KEY": secrets.token_urlsafe(60), "GPUPOOL_VAR_DIR": str(tmp_path / "var")}
    code = (
        "from django.conf import settings as s;"
        "print(s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_HSTS_SECONDS > 0, s.SECURE_SSL_REDIRECT,"
        " s.SECURE_PROXY_SSL_HEADER)"
    )
    result = _run(["shell", "--verbosity", "0", "-c", code], env)
    assert result.stdout.split() == ["True", "True", "True", "False", "None"], result.stderr
    # With DEBUG on (development) none of it applies: plain http on localhost must work.
    result = _run(["shell", "--verbosity", "0", "-c", code], {**env, "DEBUG": "1"})
    assert result.stdout.split() == ["False", "False", "False", "False", "None"], result.stderr


def test_a_secret_key_is_required_without_debug(tmp_path):
    result = _run(["check"], {"DEBUG": "0", "GPUPOOL_VAR_DIR": str(tmp_path / "var")})
    assert result.returncode != 0 and "SECRET_KEY" in result.stderr


def test_only_a_test_run_may_hash_passwords_in_fewer_rounds_than_djangos(tmp_path):
    env = {"SECRET_KEY": secrets.token_urlsafe(60), "GPUPOOL_VAR_DIR": str(tmp_path / "var")}
    code = "from django.contrib.auth.hashers import make_password; print(make_password('pw').split('$')[1])"
    fewer = {"PASSWORD_PBKDF2_ITERATIONS": "1000"}
    refused = _run(["shell", "--verbosity", "0", "-c", code], {**env, "DEBUG": "0", **fewer})
    assert refused.returncode != 0 and "PASSWORD_PBKDF2_ITERATIONS=1000 is below Django's" in refused.stderr
    production = _run(["shell", "--verbosity", "0", "-c", code], {**env, "DEBUG": "0"})
    assert int(production.stdout) >= 1_000_000, production.stderr
    lowered = _run(["shell", "--verbosity", "0", "-c", code], {**env, "DEBUG": "1", **fewer})
    assert lowered.stdout.split() == ["1000"], lowered.stderr


def test_a_killed_workers_task_comes_back_within_minutes_but_never_twice_while_it_waits():
    """The broker hands an unacknowledged task out again after the visibility timeout: short
    enough that a killed worker's task is not lost for an hour, longer than any retry countdown
    (a task waiting out its countdown would otherwise be delivered a second time)."""
    from django.conf import settings

    from accounts.tasks import _backoff as account_backoff
    from groups.tasks import _backoff as group_backoff

    timeout = settings.CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"]
    assert timeout <= 15 * 60
    longest_countdown = max(account_backoff(50), group_backoff(50), settings.SUBMIT_RETRY_MAX_SECONDS, 600)
    assert timeout > longest_countdown
