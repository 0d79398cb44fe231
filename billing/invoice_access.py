"""Whose invoices a person may read: their own, and those of the groups whose bills they see
(the PI and managers: groups.models.MANAGING_ROLES). Everyone else gets a 404 for an invoice,
as for one that does not exist; a member sees their own share of a group's bill on the
group's page (billing.group_money.member_shares), not the group's invoice."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from billing.models import Invoice
from groups.models import MANAGING_ROLES, Membership
from groups.queries import GroupError, membership, visible_group


def bill_group_ids(user) -> QuerySet:
    """Ids of the groups whose bills `user` sees (an active PI or manager)."""
    return Membership.objects.active().filter(user=user, role__in=MANAGING_ROLES).values("group_id")


def invoices_seen_by(user) -> QuerySet[Invoice]:
    if not getattr(user, "is_authenticated", False):
        return Invoice.objects.none()
    return Invoice.objects.filter(Q(user=user) | Q(group_id__in=bill_group_ids(user)))


def group_invoices(user, group_id) -> QuerySet[Invoice]:
    """A group's invoices for its PI and managers. GroupError: 404 to a non-member (the group
    is not theirs to learn of), 403 to a member who does not see the group's bills."""
    group = visible_group(user, group_id)
    found = membership(user, group.pk)
    if not (found and found.may_manage):
        raise GroupError("group", "Only the group's PI and managers see its invoices; your share is on its page.", 403)
    return Invoice.objects.filter(group=group)
