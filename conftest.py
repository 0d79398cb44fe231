"""Shared fixtures: the named people of access tests, and the real dev cluster."""

import pytest
from django.contrib.auth import get_user_model

from accounts.models import Role


def _person(username: str, role: str = Role.USER, plan: str = "pro"):
    user = get_user_model().objects.create_user(username=username, password="pw-" + username, email=f"{username}@x.org")
    user.profile.role = role
    user.profile.save()
    subscribe(user, plan)
    return user


def subscribe(user, plan_code: str, status: str = "active"):
    """Put `user` on a plan as a new subscription row (no audit entry, no Slurm change: tests
    that need those call accounts.actions.lifecycle.change_plan)."""
    from django.conf import settings

    from plans.actions import subscriptions
    from plans.models import Plan

    subscriptions.change(user, Plan.objects.get(code=plan_code), status)
    if plan_code in settings.PAY_AFTERWARDS_PLANS:
        # A test account billed afterwards has the credit limit an admin would approve; the
        # limit's own tests (billing/tests/test_credit_limits.py) remove or lower it.
        from decimal import Decimal

        from billing.actions import approve_credit_limit

        approve_credit_limit(user, Decimal("100000"), actor=None, reason="test account")


@pytest.fixture
def alice(db):
    """A user who owns things."""
    return _person("alice")


@pytest.fixture
def bob(db):
    """Another user, who must see nothing of alice's."""
    return _person("bob")


@pytest.fixture
def admin_user(db):
    return _person("ada", Role.ADMIN, "enterprise")


@pytest.fixture
def marketer(db):
    return _person("mark", Role.MARKETING, "free")


DATABASE_FIXTURES = {"db", "transactional_db", "django_db_reset_sequences", "django_db_serialized_rollback"}
SERVICE_FIXTURES = {"redis_client", "live_server", "provision", "slurm"}


def pytest_collection_modifyitems(config, items):
    """`pure`: a test that needs no database, no cluster, no browser and no service fixture
    (`make test-pure` runs these: seconds, no root). Decided from its markers and fixtures."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if (
            item.get_closest_marker("django_db") is None
            and item.get_closest_marker("slurm") is None
            and item.get_closest_marker("browser") is None
            and not fixtures & (DATABASE_FIXTURES | SERVICE_FIXTURES)
        ):
            item.add_marker(pytest.mark.pure)


def pytest_report_header(config):
    from django.conf import settings

    # Which cluster the slurm-marked tests use (scripts/test.sh runs them once per release).
    return f"Slurm dev cluster: {settings.SLURM_RELEASE} at {settings.SLURMRESTD_URL}"


@pytest.fixture(scope="session", autouse=True)
def _close_stray_test_database_sessions(django_db_setup, django_db_blocker):
    """Web process subprocesses and Channels' worker threads keep PostgreSQL sessions open;
    end them so the test database can be dropped at the end of the run."""
    yield
    from django.db import connection

    if connection.vendor != "postgresql" or not connection.settings_dict["NAME"].startswith("test_"):
        return  # no test database was made (a run of database-free tests only)
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


@pytest.fixture(autouse=True)
def _product_plans(request):
    """Transactional tests empty every table when they end, the seeded catalogues too: put
    docs/product.md's plans and the seeded rate cards back before each test that uses the database."""
    uses_database = request.node.get_closest_marker("django_db") is not None or bool(
        {"db", "transactional_db"} & set(request.fixturenames)
    )
    if not uses_database:
        return
    request.getfixturevalue("_django_db_helper")
    from plans.models import Plan, PlanGpuType, RateCard, RateCardDiscount, RateCardGpuPrice, RateCardSpotMultiplier
    from plans.seed import seed_product_plans, seed_rate_cards, seed_spot_shares

    seed_product_plans(Plan, PlanGpuType)
    seed_rate_cards(RateCard, RateCardGpuPrice, RateCardDiscount)
    seed_spot_shares(RateCard, RateCardSpotMultiplier)


@pytest.fixture(scope="session", autouse=True)
def _empty_test_redis():
    """Start from an empty Redis database: no task or rate-limit count of an earlier run."""
    import redis
    from django.conf import settings

    if not settings.REDIS_URL.rstrip("/").endswith("/13"):
        yield
        return
    redis.Redis.from_url(settings.REDIS_URL).flushdb()
    yield


@pytest.fixture(autouse=True)
def _fresh_caches(request):
    """Each test starts with empty caches: the in-process one holds allauth's rate limits (a
    confirmation mail to one address goes at most once in 3 minutes, so an earlier test's
    sign-up would keep a later one's mail from being sent), and the heatmap's shared picture
    lives in Redis for seconds."""
    from django.core.cache import caches

    from jobs.mirror.passes import forget_listing_memos

    caches["default"].clear()
    # The mirror's memo of rows in step with Slurm belongs to the last test's database.
    forget_listing_memos()
    if request.node.get_closest_marker("django_db") is None and "db" not in request.fixturenames:
        return
    from django.conf import settings

    from console.heatmap import CACHE_KEY
    from foundation.redis_client import redis_client

    caches[settings.HEATMAP_CACHE].delete(CACHE_KEY)
    # A group's usage rows are shared by the processes for a minute (groups/usage.py): another
    # test's group of the same id must not see them.
    stale = list(redis_client().scan_iter(match="*groups:usage:*", count=1000))
    if stale:
        redis_client().delete(*stale)


@pytest.fixture(scope="session")
def slurm(slurm_limits):
    """The service client of the real dev cluster; fails (never skips) when it is down."""
    from django.conf import settings

    from cluster.clusters.services import rest_client
    from cluster.errors import SlurmError

    client = rest_client()
    try:
        client.check_access()
    except SlurmError as exc:
        pytest.fail(
            f"the Slurm {settings.SLURM_RELEASE} dev cluster is not usable ({exc}); "
            f"start it with `make cluster-up SLURM_RELEASE={settings.SLURM_RELEASE}`"
        )
    return client


@pytest.fixture(scope="session")
def slurm_limits():
    """The QOS of docs/product.md's plans written into the dev cluster's slurmdbd, as `make dev`
    does (from the plan rows there; here from the same seed, since a session may have no
    database). Tests that change plans sync again themselves."""
    from django.conf import settings

    from cluster.clusters.services import slurm_cli
    from cluster.errors import SlurmError
    from plans.product_plans import PRODUCT_PLANS, product_plan
    from plans.slurm_limits import qos_limits, spot_qos_limits

    cli = slurm_cli()
    plans = [product_plan(plan["code"]) for plan in PRODUCT_PLANS]
    try:
        # The spot QOS first: every plan's QOS names it in its Preempt list.
        if settings.SPOT_QOS:
            cli.ensure_qos(spot_qos_limits(plans))
        for plan in plans:
            cli.ensure_qos(qos_limits(plan))
    except SlurmError as exc:
        pytest.fail(f"the plans' limits could not be written into the dev cluster: {exc}")


@pytest.fixture
def provision(slurm_limits):
    """provision(user) -> profile: a real cluster account, locked again after the test."""
    from testing.slurm import unique_cluster_name

    names = []

    def _provision(user):
        from accounts import actions

        profile = actions.provision(user.profile.pk, preferred_name=unique_cluster_name("ptj"))
        names.append(profile.cluster_username)
        return profile

    yield _provision
    from testing.slurm import remove_cluster_user

    for name in names:
        remove_cluster_user(name)


@pytest.fixture
def api_client_for():
    def _client(user):
        from rest_framework.test import APIClient

        from accounts.models import ApiToken

        _token, key = ApiToken.issue(user, "test")
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
        return client

    return _client


# alice's cluster uid where her jobs' files are written (as Slurm does, as her); need not exist on this host.
ALICE_CLUSTER_UID = 4242


@pytest.fixture
def job_root(settings, tmp_path, alice):
    """A job root of alice's (cluster user "u"): Slurm's path /srv/gpupool/jobs, here a folder of tmp_path."""
    settings.SLURM_JOB_ROOT = "/srv/gpupool/jobs"
    settings.SLURM_JOB_ROOT_LOCAL = tmp_path / "jobs"
    (tmp_path / "jobs").mkdir()
    alice.profile.cluster_username = "u"
    alice.profile.cluster_uid = ALICE_CLUSTER_UID
    alice.profile.cluster_gid = ALICE_CLUSTER_UID
    alice.profile.save()
    return tmp_path / "jobs"


@pytest.fixture
def eager_tasks():
    """Tasks enqueued on commit run at once, as a worker would run them."""
    from gpupool.celery import app

    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = False
