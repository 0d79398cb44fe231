"""Settings for the GPU pool portal; every deployment knob is an environment variable.

See README.md ("Configuration") for the list. Defaults give a working local
development portal: SQLite, Redis on localhost and the dev cluster built by
`make cluster-up`.
"""

import shlex
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import dj_database_url
from celery.schedules import crontab
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.core.exceptions import ImproperlyConfigured

from cluster.clusters.registry import ClusterConfigError, load_clusters_file
from foundation.env import env_bool, env_float, env_int, env_list, env_path, env_secret, env_str
from foundation.gpu_types import DEFAULT_GPU_TYPES_FILE, load_gpu_types
from foundation.images import DEFAULT_IMAGE_CATALOGUE_FILE, load_image_catalogue

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = env_path("GPUPOOL_VAR_DIR", BASE_DIR / "var")
VAR_DIR.mkdir(parents=True, exist_ok=True)  # SQLite file, beat schedule, demo passwords

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_secret("SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY (or SECRET_KEY_FILE) must be set when DEBUG is off")
    SECRET_KEY = "dev-only-insecure-key-do-not-use-in-production"

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
SITE_URL = env_str("SITE_URL", "http://127.0.0.1:8000")
# What e-mails and pages call the portal.
SITE_NAME = env_str("SITE_NAME", "GPU pool")

# --- HTTPS and cookies: on by default whenever DEBUG is off ---------------------------------
# Behind a TLS-terminating proxy set SECURE_PROXY_SSL_HEADER=HTTP_X_FORWARDED_PROTO (only when
# that proxy always sets the header) and SECURE_SSL_REDIRECT=1. See deploy/production.env.example.
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", not DEBUG)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", not DEBUG)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0 if DEBUG else 31_536_000, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", not DEBUG)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
_proxy_ssl_header = env_str("SECURE_PROXY_SSL_HEADER", "")
SECURE_PROXY_SSL_HEADER = (_proxy_ssl_header, "https") if _proxy_ssl_header else None
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# HSTS preload is a commitment for the whole domain that only its owner can make: opt-in,
# so Django's reminder about it is not an error of this deployment.
SILENCED_SYSTEM_CHECKS = [] if SECURE_HSTS_PRELOAD else ["security.W021"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "allauth",
    "allauth.account",
    # Sign-in through an institution's OpenID Connect provider (configured by OIDC_* below).
    "allauth.socialaccount",
    "allauth.socialaccount.providers.openid_connect",
    "rest_framework",
    "drf_spectacular",
    "channels",
    "foundation",
    "gpupool",
    "audit",
    "plans",
    "accounts",
    "groups",
    "reservations",
    "datasets",
    "cluster",
    "jobs",
    "sweeps",
    "console",
    "billing",
    "credits",
    "telemetry",
    "alerts",
    "interactive",
    "failures",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # Dates rendered in the reader's zone (the browser's, from a cookie).
    "gpupool.time_zone.ReaderTimeZoneMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "allauth.account.middleware.AccountMiddleware",
    "credits.middleware.BrowserIdMiddleware",
]

ROOT_URLCONF = "gpupool.urls"
ASGI_APPLICATION = "gpupool.asgi.application"
WSGI_APPLICATION = "gpupool.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "builtins": [
                "foundation.templatetags.money",
                "foundation.templatetags.units",
                "foundation.templatetags.resources",
            ],
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "console.context_processors.navigation",
            ],
        },
    },
]

# SQLite is the zero-setup default; DATABASE_URL=postgres://... selects PostgreSQL.
DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'db.sqlite3'}"),
        # Reuse connections for a minute: opening one costs PostgreSQL several ms per request.
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 60, minimum=0),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # The worker, beat, emulator and web processes share one file. WAL lets readers go on
    # while one writes; a writer waits up to 20 s for the lock instead of failing; and
    # IMMEDIATE transactions take the write lock when they begin, so a transaction never
    # fails half-way with "database is locked" when it first writes after reading (a
    # deferred one cannot wait for that lock: SQLite would deadlock, so it refuses at once).
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    )
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# Django's hashers, PBKDF2 first through a gate (accounts/hashers.py: why).
PASSWORD_HASHERS = [
    "accounts.hashers.GatedPBKDF2PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2SHA1PasswordHasher",
    "django.contrib.auth.hashers.Argon2PasswordHasher",
    "django.contrib.auth.hashers.BCryptSHA256PasswordHasher",
    "django.contrib.auth.hashers.ScryptPasswordHasher",
]
PASSWORD_HASHES_AT_ONCE = env_int("PASSWORD_HASHES_AT_ONCE", 1, minimum=1)
# How soon a web process's thread waiting for the GIL gets it (gpupool/asgi.py; CPython's is 0.005).
WEB_GIL_SWITCH_SECONDS = env_float("WEB_GIL_SWITCH_SECONDS", 0.001)
if not 0 < WEB_GIL_SWITCH_SECONDS <= 1:
    raise ImproperlyConfigured(f"WEB_GIL_SWITCH_SECONDS={WEB_GIL_SWITCH_SECONDS} is not within (0, 1]")
# PBKDF2's rounds: Django's own count unless lowered for a test run (testing/pytest_env.py), which
# only DEBUG allows. The suite creates and signs in thousands of users, and at Django's count each
# hash is half a second of CPU: most of the suite's time went to hashing test passwords.
PASSWORD_PBKDF2_ITERATIONS = env_int("PASSWORD_PBKDF2_ITERATIONS", PBKDF2PasswordHasher.iterations, minimum=1)
if PASSWORD_PBKDF2_ITERATIONS < PBKDF2PasswordHasher.iterations and not DEBUG:
    raise ImproperlyConfigured(
        f"PASSWORD_PBKDF2_ITERATIONS={PASSWORD_PBKDF2_ITERATIONS} is below Django's {PBKDF2PasswordHasher.iterations}:"
        " only a test run (DEBUG on) may lower it"
    )
AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",
    "allauth.account.auth_backends.AuthenticationBackend",
]
LOGIN_REDIRECT_URL = "/"
ACCOUNT_LOGOUT_REDIRECT_URL = "/accounts/login/"
ACCOUNT_LOGIN_METHODS = {"username", "email"}
ACCOUNT_SIGNUP_FIELDS = ["email*", "username*", "password1*", "password2*"]
ACCOUNT_EMAIL_VERIFICATION = env_str("ACCOUNT_EMAIL_VERIFICATION", "optional")
ACCOUNT_SIGNUP_REDIRECT_URL = "/"
ACCOUNT_ADAPTER = "accounts.adapter.AccountAdapter"

# --- Sign-in through an institution (OpenID Connect: Keycloak, CILogon...), docs/groups.md -----
# Off until OIDC_SERVER_URL (the issuer) is set. The authorization-code flow with PKCE; a value
# of the claim OIDC_GROUPS_CLAIM that an admin tied to a portal group (Group.claim_value) makes
# the person a member, at every sign-in; signing out also ends the provider's session.
OIDC_SERVER_URL = env_str("OIDC_SERVER_URL", "")
OIDC_PROVIDER_ID = env_str("OIDC_PROVIDER_ID", "institution")
OIDC_PROVIDER_NAME = env_str("OIDC_PROVIDER_NAME", "your institution")
OIDC_CLIENT_ID = env_str("OIDC_CLIENT_ID", "")
OIDC_CLIENT_SECRET = env_secret("OIDC_CLIENT_SECRET") or ""
OIDC_GROUPS_CLAIM = env_str("OIDC_GROUPS_CLAIM", "groups")


def oidc_providers(server_url: str, client_id: str, secret: str) -> dict:
    app = {
        "provider_id": OIDC_PROVIDER_ID,
        "name": OIDC_PROVIDER_NAME,
        "client_id": client_id,
        "secret": secret,
        "settings": {"server_url": server_url, "oauth_pkce_enabled": True},
    }
    return {"openid_connect": {"OAUTH_PKCE_ENABLED": True, "APPS": [app] if server_url else []}}


SOCIALACCOUNT_PROVIDERS = oidc_providers(OIDC_SERVER_URL, OIDC_CLIENT_ID, OIDC_CLIENT_SECRET)
SOCIALACCOUNT_ADAPTER = "accounts.adapter.SocialAccountAdapter"
# The provider vouches for the address (its email_verified claim); no second sign-up form.
SOCIALACCOUNT_AUTO_SIGNUP = True
SOCIALACCOUNT_EMAIL_AUTHENTICATION = False  # an address alone never merges into a local account
# Sign-in attempts per client address a minute; failed ones per address a minute, and 5 in 5
# minutes per login name from one address (accounts/adapter.py: why not per name alone).
# Password resets clear the last.
SIGN_IN_ATTEMPTS_PER_MINUTE = env_int("SIGN_IN_ATTEMPTS_PER_MINUTE", 30, minimum=1)
SIGN_IN_FAILURES_PER_MINUTE = env_int("SIGN_IN_FAILURES_PER_MINUTE", 10, minimum=1)
ACCOUNT_RATE_LIMITS = {
    "login": f"{SIGN_IN_ATTEMPTS_PER_MINUTE}/m/ip",
    "login_failed": f"{SIGN_IN_FAILURES_PER_MINUTE}/m/ip,5/300s/key",
}

LANGUAGE_CODE = "en-us"
# One way of writing dates and times everywhere: gpupool/formats/en/formats.py.
FORMAT_MODULE_PATH = ["gpupool.formats"]
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = env_path("STATIC_ROOT", VAR_DIR / "staticfiles")
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise warns on every request without it
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    "console.static_finders.PlotlyFinder",  # vendor/plotly.min.js from the plotly package
]
# `manage.py collectstatic` (make dev, deploy) writes each file under a name with its content's
# hash beside a gzip and a brotli copy; WhiteNoise (and nginx in production) serve the copy a
# browser asks for, and hashed names with a year's Cache-Control (immutable). With DEBUG on,
# pages name the plain files (Django's rule), still served compressed. STATIC_HASHED=0: plain
# names and no manifest needed (the tests, which never run collectstatic; one test does).
STATIC_HASHED = env_bool("STATIC_HASHED", True)
# Served from STATIC_ROOT alone, where the compressed copies are, DEBUG or not: after editing a
# file under static/, run collectstatic (make migrate does). The tests read static/ directly.
WHITENOISE_USE_FINDERS = env_bool("WHITENOISE_USE_FINDERS", False)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if STATIC_HASHED
        else "whitenoise.storage.CompressedStaticFilesStorage"
    },
}

EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "gpupool@localhost")
# Where django.core.mail.backends.filebased.EmailBackend writes (a browser test reads it there).
EMAIL_FILE_PATH = env_path("EMAIL_FILE_PATH", VAR_DIR / "mail")

# --- Telemetry ------------------------------------------------------------------------------
TELEMETRY_INTERVAL_SECONDS = env_int("TELEMETRY_INTERVAL_SECONDS", 10, minimum=1)
TELEMETRY_RAW_RETENTION = timedelta(minutes=env_int("TELEMETRY_RAW_RETENTION_MINUTES", 120, minimum=10))
TELEMETRY_MINUTE_RETENTION = timedelta(hours=env_int("TELEMETRY_MINUTE_RETENTION_HOURS", 48, minimum=2))
TELEMETRY_HOUR_RETENTION = timedelta(days=env_int("TELEMETRY_HOUR_RETENTION_DAYS", 90, minimum=2))
# The dev cluster has no GPUs: an emulator derives samples from real Slurm allocations.
# Never on in production, where node agents (NVML) or DCGM exporters send real ones.
TELEMETRY_EMULATOR = env_bool("TELEMETRY_EMULATOR", False)
# The NVIDIA driver the emulator states for every node (its GPUs have none); shown as emulated.
TELEMETRY_EMULATOR_DRIVER = env_str("TELEMETRY_EMULATOR_DRIVER", "550.54.15")
# DCGM exporters to scrape, as an alternative to agents: node=URL pairs, comma-separated
# (gpu-a100-01=http://gpu-a100-01:9400/metrics,...) -> {node: URL}. The node is fixed here, never
# read from the exporter's labels: what answers on a node's URL speaks for that node only.
from telemetry.dcgm import parse_exporter_urls  # noqa: E402  (pure parsing, no models)

DCGM_EXPORTER_URLS = parse_exporter_urls(env_str("DCGM_EXPORTER_URLS", ""))
# A site's Prometheus that already scrapes DCGM exporters (telemetry/prometheus.py): one query a
# read, every PROMETHEUS_READ_SECONDS; PROMETHEUS_DCGM_MATCHERS narrows it (e.g. job="dcgm").
PROMETHEUS_URL = env_str("PROMETHEUS_URL", "")
PROMETHEUS_READ_SECONDS = env_int("PROMETHEUS_READ_SECONDS", 15, minimum=1)
PROMETHEUS_DCGM_MATCHERS = env_str("PROMETHEUS_DCGM_MATCHERS", "")
ALERT_EVALUATION_SECONDS = env_int("ALERT_EVALUATION_SECONDS", 30, minimum=5)

# --- Redis: Celery broker and Channels layer -------------------------------------------
REDIS_URL = env_str("REDIS_URL", "redis://127.0.0.1:6379/0")
CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = None
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# A task a killed worker had taken (acknowledged late, so still the broker's) is handed out
# again after this long; Redis's default is an hour. It must stay above the longest retry
# countdown (600 s: accounts, groups and plans tasks; SUBMIT_RETRY_MAX_SECONDS) and the longest
# run of any task, or such a task would be handed out a second time while it waits or runs.
CELERY_VISIBILITY_TIMEOUT_SECONDS = env_int("CELERY_VISIBILITY_TIMEOUT_SECONDS", 900, minimum=660)
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": CELERY_VISIBILITY_TIMEOUT_SECONDS}
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CLUSTER_SYNC_INTERVAL_SECONDS = env_float("CLUSTER_SYNC_INTERVAL_SECONDS", 2.0)
# HTTP requests one portal process serves side by side (gpupool/asgi_http.py), each on a
# thread of its own with its own database connection: keep processes x threads below
# PostgreSQL's max_connections.
HTTP_THREADS = env_int("HTTP_THREADS", 16, minimum=1)
# Streamed answers (a dataset file, a log) go at their client's pace on threads of their own
# beside the HTTP_THREADS, at most this many per process. Any answer whose client takes nothing
# for HTTP_STREAM_STALL_SECONDS is cut off; the response bytes a process holds for slow
# clients are capped at WEB_BYTES_IN_FLIGHT (gpupool/flow_budget.py).
HTTP_STREAMS = env_int("HTTP_STREAMS", 64, minimum=1)
HTTP_STREAM_STALL_SECONDS = env_float("HTTP_STREAM_STALL_SECONDS", 120.0)
WEB_BYTES_IN_FLIGHT = env_int("WEB_BYTES_IN_FLIGHT", 64 * 1024 * 1024, minimum=1024 * 1024)
# Database threads of the asynchronous side (foundation/async_db.py), each with its connection:
# the session proxy's decisions, and the job-status WebSocket's sign-in and connect.
PROXY_DB_THREADS = env_int("PROXY_DB_THREADS", 4, minimum=1)
SOCKETS_DB_THREADS = env_int("SOCKETS_DB_THREADS", 4, minimum=1)
# The session proxy (interactive/proxy.py): simultaneous requests of one client share one
# decision (who may reach which server); above 0, a decision is also reused this long (a session
# stopped meanwhile is still forwarded to for that long: off by default, the pace below bounds
# the database work). Requests per second per user, and the burst above it (a page load of
# JupyterLab at once; its polling is a few a second; past the burst a request waits its turn).
# bench/proxy_flood.py: a burst of 300 let one user's flood move others' p95 by up to 2.3x.
SESSION_PROXY_DECISION_SECONDS = env_float("SESSION_PROXY_DECISION_SECONDS", 0.0)
SESSION_PROXY_REQUESTS_PER_SECOND = env_float("SESSION_PROXY_REQUESTS_PER_SECOND", 20.0)
SESSION_PROXY_BURST = env_int("SESSION_PROXY_BURST", 150, minimum=1)
# A request past its user's pace waits up to this long for it (answered late, not refused),
# then gets the 429.
SESSION_PROXY_HOLD_SECONDS = env_float("SESSION_PROXY_HOLD_SECONDS", 5.0)
# The web server (gpupool/serve.py): connections one process holds at once (pages' sockets
# included; beyond them a 503 at once), and how long an idle keep-alive connection stays.
WEB_MAX_CONNECTIONS = env_int("WEB_MAX_CONNECTIONS", 4000, minimum=16)
WEB_KEEPALIVE_SECONDS = env_int("WEB_KEEPALIVE_SECONDS", 20, minimum=1)
WEB_ACCESS_LOG = env_bool("WEB_ACCESS_LOG", False)
# Request bodies above these are refused (413) before they are read (gpupool/body_limit.py):
# the portal's largest are a dataset upload's 8 MiB chunk and a telemetry batch of 8 MiB; a
# session's, a file JupyterLab sends whole (under 15 MB, base64 in JSON). nginx has the same.
MAX_REQUEST_BODY_BYTES = env_int("MAX_REQUEST_BODY_BYTES", 9 * 1024 * 1024, minimum=65536)
SESSION_MAX_BODY_BYTES = env_int("SESSION_MAX_BODY_BYTES", 32 * 1024 * 1024, minimum=65536)
# Changed jobs the mirror fetches from slurmrestd at once (each by id; jobs/mirror/passes.py).
MIRROR_FETCH_CONCURRENCY = env_int("MIRROR_FETCH_CONCURRENCY", 8, minimum=1)
# Submit to Slurm from the web request itself once the job is recorded (a worker takes over on
# any failure): the job is in Slurm when the API answers. Needs the web process to be allowed
# to make job directories; where it is not, every job goes the worker's way (jobs.tasks.submit_now).
SUBMIT_INLINE = env_bool("SUBMIT_INLINE", True)
# Sweeps (sweeps/): the most points one may have, and the cluster's MaxArraySize (Slurm's
# default 1001: task ids 0-1000). A larger sweep is split into arrays of this many tasks.
SWEEP_MAX_POINTS = env_int("SWEEP_MAX_POINTS", 10_000, minimum=1)
# The most sweep tasks a user may have waiting, per GPU their plan may hold at once (Free's one:
# 2,500; Pro's four: one sweep of SWEEP_MAX_POINTS): each is a row in every mirror pass and a job in
# slurmctld's queue.
SWEEP_WAITING_TASKS_PER_GPU = env_int("SWEEP_WAITING_TASKS_PER_GPU", 2_500, minimum=1)
SLURM_MAX_ARRAY_SIZE = env_int("SLURM_MAX_ARRAY_SIZE", 1001, minimum=2)
SUBMIT_INLINE_TIMEOUT_SECONDS = env_float("SUBMIT_INLINE_TIMEOUT_SECONDS", 2.0)
# A job placed by the portal (`any`) that has waited JOB_MOVE_AFTER_SECONDS moves once to a
# cluster where it would start at least JOB_MOVE_MARGIN_MINUTES sooner (jobs/moves.py).
JOB_MOVE_MARGIN_MINUTES = env_int("JOB_MOVE_MARGIN_MINUTES", 15, minimum=1)
JOB_MOVE_AFTER_SECONDS = env_int("JOB_MOVE_AFTER_SECONDS", 120, minimum=0)
JOB_MOVES_PER_PASS = env_int("JOB_MOVES_PER_PASS", 10, minimum=1)
CELERY_BEAT_SCHEDULE = {
    "move-waiting-jobs": {"task": "jobs.moves.move_waiting_jobs", "schedule": 60.0, "options": {"expires": 60.0}},
    "mirror-cluster": {
        "task": "jobs.tasks.sync_cluster",
        "schedule": CLUSTER_SYNC_INTERVAL_SECONDS,
        # A sync that waited longer than its own interval is stale: the next one replaces it.
        "options": {"expires": CLUSTER_SYNC_INTERVAL_SECONDS},
    },
    "mirror-further-clusters": {
        "task": "jobs.tasks.sync_further_clusters",
        "schedule": CLUSTER_SYNC_INTERVAL_SECONDS,
        "options": {"expires": CLUSTER_SYNC_INTERVAL_SECONDS},
    },
    "record-accounting": {
        "task": "jobs.tasks.sync_accounting",
        "schedule": 5.0,
        "options": {"expires": 5.0},
    },
    "telemetry-rollup": {"task": "telemetry.tasks.roll_up_telemetry", "schedule": 60.0, "options": {"expires": 60.0}},
    "telemetry-emulator": {
        "task": "telemetry.tasks.emulate_telemetry",
        "schedule": float(TELEMETRY_INTERVAL_SECONDS),
        "options": {"expires": float(TELEMETRY_INTERVAL_SECONDS)},
    },
    "telemetry-dcgm": {
        "task": "telemetry.tasks.scrape_dcgm",
        "schedule": float(TELEMETRY_INTERVAL_SECONDS),
        "options": {"expires": float(TELEMETRY_INTERVAL_SECONDS)},
    },
    "telemetry-prometheus": {
        "task": "telemetry.tasks.read_prometheus_telemetry",
        "schedule": float(PROMETHEUS_READ_SECONDS),
        "options": {"expires": float(PROMETHEUS_READ_SECONDS)},
    },
    "alerts-evaluate": {
        "task": "alerts.tasks.evaluate_alerts",
        "schedule": float(ALERT_EVALUATION_SECONDS),
        "options": {"expires": float(ALERT_EVALUATION_SECONDS)},
    },
    # Mondays at 07:00: each user's and each group's GPU week (billing/digests.py); once per week and recipient.
    "billing-weekly-digests": {
        "task": "billing.tasks.send_weekly_digests",
        "schedule": crontab(minute=0, hour=7, day_of_week=1),
        "options": {"expires": 6 * 3600.0},
    },
    # Ended jobs whose efficiency a lost message or a stopped worker missed (telemetry/efficiency.py).
    "telemetry-missed-efficiencies": {
        "task": "telemetry.tasks.compute_missed_efficiencies",
        "schedule": 600.0,
        "options": {"expires": 600.0},
    },
    # Ended jobs whose failure record a lost message or a stopped worker missed (failures/tasks.py).
    "failures-record-missed": {
        "task": "failures.tasks.record_missed_runs",
        "schedule": 600.0,
        "options": {"expires": 600.0},
    },
    "failures-forget-old": {
        "task": "failures.tasks.forget_old_runs",
        "schedule": 86400.0,
        "options": {"expires": 3600.0},
    },
    # Hourly, so each month starts with the limits an allocation has left (groups/slurm_terms.py).
    "groups-sync": {"task": "groups.tasks.sync_all_groups", "schedule": 3600.0, "options": {"expires": 3600.0}},
    # Right after Slurm's monthly reset, so no group runs on last month's stale limits for long.
    "groups-after-reset": {
        "task": "groups.tasks.sync_all_groups",
        "schedule": crontab(minute=0, hour=0, day_of_month=1),
        "options": {"expires": 600.0},
    },
    "reservations-advance": {"task": "reservations.tasks.advance_reservations", "schedule": 30.0},
    # The canary after a window ends, and each check's verdict (console/actions/canary.py).
    "console-canaries": {"task": "console.tasks.run_canaries", "schedule": 15.0, "options": {"expires": 15.0}},
    # Rolling restarts: ask the next node once the last is back, follow the one restarting.
    "console-rolling-restarts": {
        "task": "console.tasks.advance_rolling_restarts",
        "schedule": 5.0,
        "options": {"expires": 5.0},
    },
    "console-image-operations": {
        "task": "console.tasks.advance_image_operations",
        "schedule": 5.0,
        "options": {"expires": 5.0},
    },
    "reservations-check": {"task": "reservations.tasks.check_reservations", "schedule": 300.0},
    # The nodes' ds_<version> features back after a slurmctld restart (datasets/actions/node_cache.py).
    # Night mode's SuspendTime and standby nodes woken at peak (console/actions/power.py).
    "console-power-policy": {
        "task": "console.tasks.apply_power_policy",
        "schedule": 60.0,
        "options": {"expires": 60.0},
    },
    "datasets-node-features": {
        "task": "datasets.tasks.sync_all_node_features",
        "schedule": 300.0,
        "options": {"expires": 300.0},
    },
    # Hourly: owners storing more than their plan allows are marked (and told once); their data is
    # listed for the admins' deletion DATASET_OVER_QUOTA_GRACE_DAYS later (datasets/over_quota.py).
    "datasets-over-quota": {
        "task": "datasets.tasks.mark_over_quota",
        "schedule": 3600.0,
        "options": {"expires": 3600.0},
    },
    # Hourly; acts once, on the 1st of the month (plans/tasks.py).
    "plans-monthly-usage-reset": {"task": "plans.tasks.reset_monthly_usage", "schedule": 3600.0},
    # Credit past CREDIT_EXPIRY_DAYS becomes expiry entries; missed grants are repaired.
    "credits-expire": {"task": "credits.tasks.expire_credits", "schedule": 3600.0, "options": {"expires": 3600.0}},
    "credits-sweep-grants": {"task": "credits.tasks.sweep_grants", "schedule": 300.0, "options": {"expires": 300.0}},
    "reconcile-submissions": {
        "task": "jobs.tasks.reconcile_submissions",
        "schedule": 15.0,
        "options": {"expires": 15.0},
    },
    "reconcile-sweep-arrays": {
        "task": "jobs.sweeps.submit.reconcile_arrays",  # its name from before sweeps/ (sweeps/submit.py)
        "schedule": 15.0,
        "options": {"expires": 15.0},
    },
    # Hourly: issue the invoices of the month that ended BILLING_CLOSE_GRACE_HOURS ago or more
    # (billing/actions/closing.py; a second run issues nothing new), and rebuild drafts with new usage.
    "billing-close-month": {"task": "billing.tasks.close_month", "schedule": 3600.0, "options": {"expires": 3600.0}},
    "billing-refresh-drafts": {
        "task": "billing.tasks.refresh_drafts",
        "schedule": 600.0,
        "options": {"expires": 600.0},
    },
}
# One beat sends, however many are started (a second stands by): gpupool/beat.py.
CELERY_BEAT_SCHEDULER = "gpupool.beat:SingleBeatScheduler"
# How long an ended job's log tail is kept for the failures page and for trying new rules (failures/).
FAILURE_RUNS_KEPT_DAYS = env_int("FAILURE_RUNS_KEPT_DAYS", 35, minimum=31)
# Task modules other than the apps' tasks.py, which Celery finds by itself.
CELERY_IMPORTS = ("billing.actions.closing", "jobs.moves", "jobs.left_plan")
# How long after a month ends its invoices wait for slurmdbd's late records before issue.
BILLING_CLOSE_GRACE = timedelta(hours=env_int("BILLING_CLOSE_GRACE_HOURS", 2, minimum=0))
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [REDIS_URL]},
    }
}
# "default" stays in-process (allauth's rate limits live there); "shared" is Redis, for what
# every process should build once: the heatmap's picture (console/heatmap.py).
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "shared": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL},
}
HEATMAP_CACHE = "shared"
# The heatmap page refreshes every 10 s: a picture at most 5 s old, built once per 5 s.
HEATMAP_CACHE_SECONDS = env_int("HEATMAP_CACHE_SECONDS", 5, minimum=1)

# --- Slurm ------------------------------------------------------------------------------
# Which generation of the dev cluster the defaults below point at (deploy/devcluster/cluster.sh
# with the same variable): 24.11 or 26.05, each with its own directory and REST port.
DEVCLUSTER_RELEASES = {
    "24.11": ("/var/lib/gpupool/devcluster", "http://127.0.0.1:16820"),
    "26.05": ("/var/lib/gpupool/devcluster-26.05", "http://127.0.0.1:17820"),
}
SLURM_RELEASE = env_str("SLURM_RELEASE", "24.11")
if SLURM_RELEASE not in DEVCLUSTER_RELEASES:
    raise ImproperlyConfigured(f"SLURM_RELEASE must be one of {', '.join(DEVCLUSTER_RELEASES)}, not {SLURM_RELEASE!r}")
DEVCLUSTER_DIR = env_path("DEVCLUSTER_DIR", DEVCLUSTER_RELEASES[SLURM_RELEASE][0])
# The secret slurmctld's event hook signs with (deploy/slurm-events/); empty: events off and
# the polling mirror alone keeps jobs current. From a file in production (mode 600); the dev
# cluster makes one in its state directory.
SLURM_EVENTS_SECRET = env_str("SLURM_EVENTS_SECRET", "")
_events_secret_file = env_path("SLURM_EVENTS_SECRET_FILE", DEVCLUSTER_DIR / "events.secret")
if not SLURM_EVENTS_SECRET and _events_secret_file.is_file():
    SLURM_EVENTS_SECRET = _events_secret_file.read_text().strip()
SLURMRESTD_URL = env_str("SLURMRESTD_URL", DEVCLUSTER_RELEASES[SLURM_RELEASE][1])
# A data_parser version (v0.0.41, v0.0.42, v0.0.45), or `auto`: the newest the daemon serves
# that the portal speaks (cluster/slurmrest/registry.py), asked once per process.
SLURM_API_VERSION = env_str("SLURM_API_VERSION", "auto")
SLURM_JWT_KEY_FILE = env_path("SLURM_JWT_KEY_FILE", DEVCLUSTER_DIR / "root/etc/slurm/jwt_hs256.key")
SLURM_JWT_LIFETIME_SECONDS = env_int("SLURM_JWT_LIFETIME_SECONDS", 600, minimum=60)
# The Slurm user whose token reads the whole cluster (nodes, every job) for the mirror.
SLURM_SERVICE_USER = env_str("SLURM_SERVICE_USER", "slurm")
SLURM_REQUEST_TIMEOUT_SECONDS = env_float("SLURM_REQUEST_TIMEOUT_SECONDS", 10.0)
# How `scontrol`/`sacctmgr` are reached: here by entering the dev cluster's root; in
# production e.g. "ssh -o BatchMode=yes slurm-login". Split once, never passed to a shell.
SLURM_CLI_PREFIX = shlex.split(env_str("SLURM_CLI_PREFIX", f"chroot {DEVCLUSTER_DIR / 'root'}"))
SLURM_CLI_NOOP = env_bool("SLURM_CLI_NOOP", False)
SLURM_CLI_TIMEOUT_SECONDS = env_float("SLURM_CLI_TIMEOUT_SECONDS", 30.0)
SLURM_ACCOUNT = env_str("SLURM_ACCOUNT", "portal")
# Groups (groups/, docs/groups.md): each is a Slurm account "<prefix><slug>" under its
# organisation's account "<prefix><organisation>", under root.
GROUP_ACCOUNT_PREFIX = env_str("GROUP_ACCOUNT_PREFIX", "g-")
ORGANIZATION_ACCOUNT_PREFIX = env_str("ORGANIZATION_ACCOUNT_PREFIX", "o-")
GROUP_DEFAULT_ORGANIZATION = env_str("GROUP_DEFAULT_ORGANIZATION", "pool")
# Verified users may create groups (they become its PI); off: only admins do.
GROUPS_SELF_SERVICE = env_bool("GROUPS_SELF_SERVICE", True)
GROUP_INVITATION_DAYS = env_int("GROUP_INVITATION_DAYS", 14, minimum=1)
# Groups a user (not an admin) may create; each is a Slurm account.
GROUPS_PER_USER = env_int("GROUPS_PER_USER", 5, minimum=0)
if GROUP_ACCOUNT_PREFIX == ORGANIZATION_ACCOUNT_PREFIX:
    # Equal prefixes would let a group's account be named like an organisation's, and nest under it.
    raise ImproperlyConfigured("GROUP_ACCOUNT_PREFIX and ORGANIZATION_ACCOUNT_PREFIX must differ")
# The time zone of slurmctld's monthly usage reset (PriorityUsageResetPeriod=MONTHLY: midnight
# on the 1st there); a group's limits are rewritten at that moment (beat, groups-after-reset).
SLURM_USAGE_RESET_TIMEZONE = env_str("SLURM_USAGE_RESET_TIMEZONE", "UTC")
# Beat's crontab entries (groups-after-reset) read the clock in that zone.
CELERY_TIMEZONE = SLURM_USAGE_RESET_TIMEZONE
# A group's managers are e-mailed once its use of an allocation reaches WARN %; Slurm holds
# its new jobs at HOLD % (the account's GrpTRESMins).
ALLOCATION_WARN_PERCENT = env_int("ALLOCATION_WARN_PERCENT", 80, minimum=1)
ALLOCATION_HOLD_PERCENT = env_int("ALLOCATION_HOLD_PERCENT", 100, minimum=1)
SLURM_PARTITION = env_str("SLURM_PARTITION", "gpu")
# The free plan's floor (docs/slurm.md): a partition over the free plan's GPU type's nodes with a
# higher PriorityTier and a QOS capping it at a few GPUs; free jobs go to "<floor>,<partition>".
# Empty: free jobs go to SLURM_PARTITION alone (a cluster without the floor partition).
SLURM_FREE_FLOOR_PARTITION = env_str("SLURM_FREE_FLOOR_PARTITION", "floor")
# Where job directories are as Slurm sees them, and where this portal reads them.
SLURM_JOB_ROOT = env_str("SLURM_JOB_ROOT", "/srv/gpupool/jobs")
SLURM_JOB_ROOT_LOCAL = env_path("SLURM_JOB_ROOT_LOCAL", DEVCLUSTER_DIR / "root/srv/gpupool/jobs")
# "local" creates Unix users and associations in the dev cluster; "external" expects a
# directory service (LDAP, FreeIPA) to have created them and only checks.
PROVISIONING_BACKEND = env_str("PROVISIONING_BACKEND", "local")

# --- Datasets -----------------------------------------------------------------------------
# Where uploads are staged and ready versions kept (datasets/storage.py): under the dev
# cluster's root by default, so its nodes see the same tree, which their tool copies to their
# NVMe caches (deploy/node/gpupool-dataset-cache). In production a filesystem the web and
# worker hosts share and the nodes can read (read-only is enough for them).
DATASET_STORE = env_path("DATASET_STORE", DEVCLUSTER_DIR / "root/srv/gpupool/datasets")
# Jobs prefer a node that holds their data (Slurm's --prefer on ds_<version> node features,
# datasets/actions/node_cache.py); off only to measure what that placement gains (bench/datasets.py).
DATASET_PLACEMENT = env_bool("DATASET_PLACEMENT", True)
# Directories of the pool's shared storage (as the portal's worker sees them) from which admins
# may register data already there as a dataset version (datasets/importing.py); none: off.
DATASET_IMPORT_ROOTS = env_list("DATASET_IMPORT_ROOTS", [str(DEVCLUSTER_DIR / "root/srv/shared")] if DEBUG else [])
# The most files one version may hold.
DATASET_MAX_FILES_PER_VERSION = env_int("DATASET_MAX_FILES_PER_VERSION", 100_000, minimum=1)

# --- Jobs ---------------------------------------------------------------------------------
# GPU types of the pool, defined once in a file (foundation/gpu_types.py; the dev cluster is
# generated from the same file): {type: {label, memory_gb, shards_per_gpu, per_node, power_w}}.
# A bad file stops the process here.
GPU_TYPES_FILE = env_path("GPU_TYPES_FILE", DEFAULT_GPU_TYPES_FILE)
if env_str("GPU_TYPES_JSON"):
    # Refused rather than ignored, so a deployment that set it learns where its types go now.
    raise ImproperlyConfigured("GPU_TYPES_JSON is no longer read: put the GPU types in a file and set GPU_TYPES_FILE")
GPU_TYPES = load_gpu_types(GPU_TYPES_FILE).settings_dict()
# The most NVMe cache (GB, the count-only GRES gres/nvme) one job may ask for: by default the
# largest dev node's, from the same file; set it to the largest node's in production.
NVME_MAX_GB = env_int(
    "NVME_MAX_GB", max((node.nvme_gb for node in load_gpu_types(GPU_TYPES_FILE).dev_nodes), default=0), minimum=0
)

# --- Metering (billing/usage/metering.py) ------------------------------------------------------------
# slurmdbd's ClusterName: part of each usage record's identity (cluster, job id, run start).
SLURM_CLUSTER_NAME = env_str("SLURM_CLUSTER_NAME", "gpupool")
# Further Slurm clusters beside the one above (cluster/clusters/registry.py: a JSON list, each entry's
# name, slurmrestd URL, JWT key file, CLI prefix, API version, GPU types and time zone; docs/clusters.md).
# A bad file stops the process here, naming the entry and the field.
CLUSTERS_FILE = env_str("CLUSTERS_FILE", "")
try:
    EXTRA_CLUSTERS = load_clusters_file(
        Path(CLUSTERS_FILE) if CLUSTERS_FILE else None, primary_name=SLURM_CLUSTER_NAME, known_gpu_types=GPU_TYPES
    )
except ClusterConfigError as exc:
    raise ImproperlyConfigured(f"CLUSTERS_FILE {exc}") from None
# How often each cluster's slurmrestd is asked whether it answers (cluster/tasks.py); a cluster
# that stops answering shows "stale since" on the portal's pages within this plus the probe's timeout.
CLUSTER_PROBE_INTERVAL_SECONDS = env_float("CLUSTER_PROBE_INTERVAL_SECONDS", 4.0)
CLUSTER_PROBE_TIMEOUT_SECONDS = env_float("CLUSTER_PROBE_TIMEOUT_SECONDS", 3.0)
# A cluster that is not answering is probed again only this often (its "up" again shows within it).
CLUSTER_PROBE_FAILING_INTERVAL_SECONDS = env_float("CLUSTER_PROBE_FAILING_INTERVAL_SECONDS", 12.0)
CELERY_BEAT_SCHEDULE["cluster-probe"] = {
    "task": "cluster.tasks.probe_clusters",
    "schedule": CLUSTER_PROBE_INTERVAL_SECONDS,
    "options": {"expires": CLUSTER_PROBE_INTERVAL_SECONDS},
}
# Each pass reads the runs that ended in the last this many hours: slurmdbd may be that late.
METERING_WINDOW_HOURS = env_int("METERING_WINDOW_HOURS", 48, minimum=1)
METERING_INTERVAL_SECONDS = env_int("METERING_INTERVAL_SECONDS", 60, minimum=5)
CELERY_BEAT_SCHEDULE["billing-meter-usage"] = {
    "task": "billing.tasks.meter_usage",
    "schedule": float(METERING_INTERVAL_SECONDS),
    "options": {"expires": float(METERING_INTERVAL_SECONDS)},
}
# Budgets (billing/actions/budgets.py): the 80 % and 100 % e-mails, each once a month, whatever path
# the charges took; metering may also call billing.actions.budgets.check_budget after charging.
# Reserved GPU time its jobs did not use, billed once a reservation has ended (billing/actions/reserved_time.py).
CELERY_BEAT_SCHEDULE["billing-meter-reservations"] = {
    "task": "billing.tasks.meter_reservations",
    "schedule": 300.0,
    "options": {"expires": 300.0},
}
# Every 5 minutes: a pay-afterwards account whose debt and running work reached its approved limit
# has its waiting jobs held in Slurm (released once under it again): billing/actions/credit_limits.py.
CELERY_BEAT_SCHEDULE["billing-hold-at-credit-limits"] = {
    "task": "billing.tasks.hold_work_at_credit_limits",
    "schedule": 300.0,
    "options": {"expires": 300.0},
}
CELERY_BEAT_SCHEDULE["billing-check-budgets"] = {
    "task": "billing.tasks.check_budgets",
    "schedule": 300.0,
    "options": {"expires": 300.0},
}
# Image repositories the free plan may use (docs/product.md: official PyTorch/TensorFlow only).
OFFICIAL_IMAGES = env_list(
    "OFFICIAL_IMAGES",
    ["nvcr.io/nvidia/pytorch", "nvcr.io/nvidia/tensorflow", "pytorch/pytorch", "tensorflow/tensorflow"],
)
REQUIRE_IMAGE_DIGEST = env_bool("REQUIRE_IMAGE_DIGEST", False)
# The images the pool offers, pinned by tag and digest, with the plans that may use each
# (foundation/images.py; the dev cluster prewarms a stand-in of each). A bad file stops here.
IMAGE_CATALOGUE_FILE = env_path("IMAGE_CATALOGUE_FILE", DEFAULT_IMAGE_CATALOGUE_FILE)
IMAGE_CATALOGUE = load_image_catalogue(IMAGE_CATALOGUE_FILE)
# On: a job may only use a catalogue image its plan lists (the nodes hold no other; the dev
# cluster cannot pull). Off: an image outside the catalogue is allowed under the plan's
# official-images rule (a site whose nodes pull), catalogue images still only on their plans.
IMAGE_CATALOGUE_ONLY = env_bool("IMAGE_CATALOGUE_ONLY", True)
# Where this portal sees the nodes' prewarmed images (/opt/enroot/images on a node), for the
# admins' Images page. The dev cluster's five nodes share one root, so one directory is every
# node's; empty: the page lists the catalogue without what the nodes hold.
# The nodes' Unix group whose members may run deploy/node/gpupool-image-cache through sudo (the
# console's prewarm and remove): the portal's admins are put in it when provisioned (local
# backend; a directory adds them itself). On by default where the dev cluster installed the rule.
CLUSTER_OPS_GROUP = env_str(
    "CLUSTER_OPS_GROUP",
    "gpupool-ops" if (DEVCLUSTER_DIR / "root/etc/sudoers.d/gpupool-images").is_file() else "",
)
# Where data mounts may come from (the nodes' NVMe cache); mounted at /data in the job.
DATA_MOUNT_ROOTS = env_list("DATA_MOUNT_ROOTS", ["/mnt/nvme"])
# "pyxis" runs the image with srun --container-image; "none" runs the command directly on the
# node. The default follows the dev cluster: pyxis where its root loads pyxis (cluster.sh does
# unless DEVCLUSTER_CONTAINERS=0), none where it does not (or where there is no dev cluster).
JOB_RUNTIME = env_str(
    "JOB_RUNTIME",
    "pyxis" if (DEVCLUSTER_DIR / "root/etc/slurm/plugstack.conf.d/pyxis.conf").is_file() else "none",
)
if JOB_RUNTIME not in ("pyxis", "none"):
    raise ImproperlyConfigured(f"JOB_RUNTIME must be pyxis or none, not {JOB_RUNTIME!r}")
# The image the canary after a change starts on every node (console/actions/canary.py): one the
# nodes hold, in the catalogue.
CANARY_IMAGE = env_str("CANARY_IMAGE", "nvcr.io/nvidia/pytorch:24.05-py3")
# Submissions per minute per user (docs/product.md: 5), and per client address across all its
# users (several accounts behind one address, or one person with many accounts).
SUBMIT_RATE_LIMIT_PER_MINUTE = env_int("SUBMIT_RATE_LIMIT_PER_MINUTE", 5, minimum=1)
SUBMIT_RATE_LIMIT_PER_IP_PER_MINUTE = env_int("SUBMIT_RATE_LIMIT_PER_IP_PER_MINUTE", 30, minimum=1)
# Behind N reverse proxies, the client address is the Nth from the right of X-Forwarded-For.
TRUSTED_PROXY_COUNT = env_int("TRUSTED_PROXY_COUNT", 0, minimum=0)
# Longest wait between two submission attempts while Slurm is unavailable.
SUBMIT_RETRY_MAX_SECONDS = env_int("SUBMIT_RETRY_MAX_SECONDS", 300, minimum=1)
# Spot jobs: a QOS of their own, preempted by every plan's (plans/slurm_limits.py); "" turns
# spot off. A preempted job gets SIGTERM and this long before SIGKILL (Slurm's GraceTime; not
# billed), and is never preempted in its first SPOT_PREEMPT_EXEMPT_SECONDS.
# --- Power (console/actions/power.py) -------------------------------------------------------------
# Slurm's power saving suspends idle nodes after the partition's SuspendTime: this many seconds
# at night (22:00-06:00, plans/spot.py's window) and by day; 0: never (SuspendTime=NONE).
POWER_NIGHT_SUSPEND_SECONDS = env_int("POWER_NIGHT_SUSPEND_SECONDS", 0, minimum=0)
POWER_DAY_SUSPEND_SECONDS = env_int("POWER_DAY_SUSPEND_SECONDS", 0, minimum=0)
# Standby nodes stay drained and powered down until more than POWER_PEAK_QUEUE jobs wait for
# their GPU type; they go back when no job of that type waits.
POWER_STANDBY_NODES = env_list("POWER_STANDBY_NODES", [])
POWER_PEAK_QUEUE = env_int("POWER_PEAK_QUEUE", 10, minimum=0)
# A node's draw apart from its GPUs (CPUs, memory, fans, NICs) when idle, for the energy figures;
# the GPUs' idle draw is power_w.idle of their type (deploy/gpu_types.json).
NODE_HOST_IDLE_WATTS = env_int("NODE_HOST_IDLE_WATTS", 150, minimum=0)
SPOT_QOS = env_str("SPOT_QOS", "spot")
SPOT_GRACE_SECONDS = env_int("SPOT_GRACE_SECONDS", 120, minimum=0)
SPOT_PREEMPT_EXEMPT_SECONDS = env_int("SPOT_PREEMPT_EXEMPT_SECONDS", 300, minimum=0)
# How much of a log the job page and the API return (the whole file is a download).
LOG_TAIL_BYTES = env_int("LOG_TAIL_BYTES", 64 * 1024, minimum=1024)
# Per-user ceilings on things a user creates, so one account cannot grow a table without end.
# Plans billed after the month (per second, no fee up front): their accounts need a credit
# limit an admin approved (billing/actions/credit_limits.py). Unpaid invoices hold new jobs after this.
PAY_AFTERWARDS_PLANS = frozenset(env_list("PAY_AFTERWARDS_PLANS", ["enterprise"]))
INVOICE_DUE_DAYS = env_int("INVOICE_DUE_DAYS", 30, minimum=1)
# Plan switches, pauses and resumes a user may make in any 24 hours (accounts/actions/plan_choice.py).
PLAN_CHANGES_PER_DAY = env_int("PLAN_CHANGES_PER_DAY", 3, minimum=1)
MAX_API_TOKENS_PER_USER = env_int("MAX_API_TOKENS_PER_USER", 20, minimum=1)
MAX_JOB_TEMPLATES_PER_USER = env_int("MAX_JOB_TEMPLATES_PER_USER", 50, minimum=1)

# --- Credits (credits/) ---------------------------------------------------------------------
# Granted credit expires this many days after its grant (ledger entries written by a beat task).
# The most credits one grant of a campaign may give (credits/actions/campaigns.py); 50,000 is ~14 h of RTX 4090.
CAMPAIGN_GRANT_MAX_GPU_SECONDS = env_int("CAMPAIGN_GRANT_MAX_GPU_SECONDS", 50_000, minimum=1)
# The most credits a campaign may grant in all (100,000,000 is ~27,800 h of RTX 4090) and the most
# referral grants one referrer may receive in it: a typo of a few zeros is refused, not a liability.
CAMPAIGN_BUDGET_MAX_GPU_SECONDS = env_int("CAMPAIGN_BUDGET_MAX_GPU_SECONDS", 100_000_000, minimum=1)
DATASET_OVER_QUOTA_GRACE_DAYS = env_int("DATASET_OVER_QUOTA_GRACE_DAYS", 30, minimum=1)
CAMPAIGN_REFERRER_CAP_MAX = env_int("CAMPAIGN_REFERRER_CAP_MAX", 1_000, minimum=1)
# A campaign budget above this many credits (5,000,000: ~1,400 h of RTX 4090) grants nothing until
# a second marketer, not its creator, approves it.
CAMPAIGN_APPROVAL_GPU_SECONDS = env_int("CAMPAIGN_APPROVAL_GPU_SECONDS", 5_000_000, minimum=1)
CREDIT_EXPIRY_DAYS = env_int("CREDIT_EXPIRY_DAYS", 90, minimum=1)
# An invitee seen from the referrer's address or browser within this many days waits for review.
REFERRAL_SHARED_PLACE_DAYS = env_int("REFERRAL_SHARED_PLACE_DAYS", 30, minimum=1)

# --- API ----------------------------------------------------------------------------------
# The largest JSON body the API reads. A valid job spec can hold a 64 KiB command and 64
# environment values of 4 KiB; JSON escaping grows text, so the cap leaves room over that.
API_MAX_BODY_BYTES = env_int("API_MAX_BODY_BYTES", 512 * 1024, minimum=1024)
# Log reads (API logs and downloads) per user per minute: each opens files and runs the analyser.
API_LOG_READS_PER_MINUTE = env_int("API_LOG_READS_PER_MINUTE", 60, minimum=1)
# --- Reservations -------------------------------------------------------------------------
# Slurm reservations the portal makes are named <prefix><id>; others are never touched.
RESERVATION_NAME_PREFIX = env_str("RESERVATION_NAME_PREFIX", "gpupool_r")
# Starts fall on this grid (minutes), at most this many days ahead.
RESERVATION_GRID_MINUTES = env_int("RESERVATION_GRID_MINUTES", 15, minimum=1)
RESERVATION_HORIZON_DAYS = env_int("RESERVATION_HORIZON_DAYS", 30, minimum=1)

# --- Plans --------------------------------------------------------------------------------
# The plan a new account subscribes to (and the one a user without a subscription is on).
DEFAULT_PLAN = env_str("DEFAULT_PLAN", "free")

REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # JSON only, as the schema says: one body type, with a size cap (foundation/api/parsers.py).
    "DEFAULT_PARSER_CLASSES": ["foundation.api.parsers.CappedJSONParser"],
    "EXCEPTION_HANDLER": "foundation.api.exceptions.api_exception_handler",
    # `?format=` (empty) is refused, not read as no format (foundation/api/negotiation.py).
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "foundation.api.negotiation.StrictFormatNegotiation",
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "jobs.api.pagination.JobCursorPagination",
    "PAGE_SIZE": 50,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "GPU pool portal API",
    "VERSION": "1",
    "DESCRIPTION": "Submit and watch GPU jobs. Authenticate with `Authorization: Bearer <API token>`; "
    "bodies are JSON. Every refusal is a JSON object with `detail` (and `errors` by field for bad input).",
    # The schema is public on purpose: it holds no data, only what the README documents, and
    # client generators fetch it without credentials. The route itself is not in it.
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    "SERVE_INCLUDE_SCHEMA": False,
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "jobs.api.schema.postprocess"],
    # Jobs and reservations both have a `state`: name each enum, so neither name depends on
    # which app's operations are in the schema (generated clients import them by name).
    "ENUM_NAME_OVERRIDES": {
        "JobStateEnum": "jobs.models.JobState",
        "ReservationStateEnum": "reservations.models.State",
        "SubscriptionStatusEnum": "plans.models.Subscription.Status",
        "InvoiceStatusEnum": "billing.models.Invoice.Status",
        "GroupRoleEnum": "groups.models.GroupRole",
        "DatasetVersionStateEnum": "datasets.models.VersionState",
        "SessionStateEnum": "interactive.models.SessionState",
        "RollingRestartStateEnum": "console.models.RollingRestart.State",
        "RollingRestartStepStateEnum": "console.models.RollingRestartStep.State",
    },
}

# --- Interactive sessions (interactive/) ------------------------------------------------------
# Each session is served at s-<key>.SESSIONS_DOMAIN: an origin of its own (interactive/origins.py).
# `*.localhost` names the loopback in browsers, for development; a site points a wildcard DNS
# record (and certificate) for the domain at the portal.
_site = urlsplit(SITE_URL)
SESSIONS_DOMAIN = env_str("SESSIONS_DOMAIN", "sessions.localhost")
SESSIONS_SCHEME = env_str("SESSIONS_SCHEME", _site.scheme or "http")
SESSIONS_PORT = env_int("SESSIONS_PORT", _site.port or 0, minimum=0)
# How often a starting session's server is asked whether it is up, and for how long after its job
# started before the session is called failed (and its job cancelled).
SESSION_START_POLL_SECONDS = env_float("SESSION_START_POLL_SECONDS", 0.5)
SESSION_START_TIMEOUT_SECONDS = env_int("SESSION_START_TIMEOUT_SECONDS", 600, minimum=30)
# Idle culling (interactive/actions/culling.py): under this GPU compute (%), with no kernel activity, for
# the plan's session_idle_minutes, then warned this long before the stop.
SESSION_IDLE_GPU_PERCENT = env_float("SESSION_IDLE_GPU_PERCENT", 5.0)
SESSION_IDLE_WARNING_SECONDS = env_int("SESSION_IDLE_WARNING_SECONDS", 300, minimum=0)
SESSION_WEBSOCKET_MAX_BYTES = env_int("SESSION_WEBSOCKET_MAX_BYTES", 64 * 1024 * 1024, minimum=1024)
CELERY_BEAT_SCHEDULE["sessions-starting"] = {
    "task": "interactive.tasks.look_at_starting_sessions",
    "schedule": 15.0,
    "options": {"expires": 15.0},
}
CELERY_BEAT_SCHEDULE["sessions-cull-idle"] = {
    "task": "interactive.tasks.cull_idle_sessions",
    "schedule": 60.0,
    "options": {"expires": 60.0},
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
}
