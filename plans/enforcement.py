"""Making slurmdbd hold the plans' limits: drift (what differs) and sync (write it).

Subscribers are the provisioned, active users; each association gets the terms of the
user's current plan (plans.slurm_limits). Deactivated users keep the hold their
deactivation put on them (accounts/actions/lifecycle.py), so they are left alone here.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model

from cluster.clusters.services import slurm_cli
from cluster.commands.cli import SlurmCli
from cluster.commands.limits import AssociationLimits
from plans.catalog import plan_for
from plans.slurm_limits import all_qos_limits, association_limits


def wanted_associations() -> list[AssociationLimits]:
    users = (
        get_user_model()
        .objects.filter(is_active=True, profile__cluster_username__isnull=False, profile__provisioned_at__isnull=False)
        .select_related("profile")
        .order_by("pk")
    )
    return [
        association_limits(user.profile.cluster_username, plan_for(user), is_admin=user.profile.role == "admin")
        for user in users
    ]


def capped_associations() -> list[AssociationLimits]:
    """The subscribers' associations that carry a GPU-minute budget."""
    return [limits for limits in wanted_associations() if limits.gpu_minutes is not None]


def drift(cli: SlurmCli | None = None) -> list[str]:
    cli = cli or slurm_cli()
    found = []
    wanted_qos = all_qos_limits()
    shown_qos = cli.show_qos([limits.name for limits in wanted_qos])
    for limits in wanted_qos:
        found += limits.differences(shown_qos.get(limits.name))
    shown_associations = cli.show_all_association_limits(settings.SLURM_ACCOUNT)
    for limits in wanted_associations():
        found += limits.differences(shown_associations.get((limits.user, limits.account)))
    return found


def ensure_qos_exist(names: list[str], cli: SlurmCli) -> list[str]:
    """Create, with their plans' limits, the QOS of `names` that slurmdbd lacks (a cluster
    where `slurm_limits --sync` never ran); returns the names created. One read when all exist."""
    missing = set(names) - set(cli.show_qos(list(names)))
    if cli.noop or not missing:
        return []
    for limits in all_qos_limits():
        if limits.name in missing:
            cli.ensure_qos(limits, exists=False)
    return sorted(missing)


def sync(*, noop: bool = False, cli: SlurmCli | None = None) -> list[list[str]]:
    """Write every plan's QOS, then every subscriber's association; returns the commands."""
    reader = cli or slurm_cli()
    wanted_qos = all_qos_limits()
    existing = reader.show_qos([limits.name for limits in wanted_qos])
    cli = SlurmCli(prefix=reader.prefix, noop=True, timeout=reader.timeout) if noop else reader
    start = len(cli.executed)
    for limits in wanted_qos:
        cli.ensure_qos(limits, exists=limits.name in existing)
    for limits in wanted_associations():
        cli.set_association_limits(limits)
    return cli.executed[start:]
