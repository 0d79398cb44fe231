"""{% job_credit_use job %}: the credits a job used (spends whose reference names the job)."""

from django import template

from credits.actions.ledger import job_reference, spendable_balance
from credits.models import LedgerEntry

register = template.Library()


@register.inclusion_tag("credits/_job_credit_use.html")
def job_credit_use(job):
    spends = list(
        LedgerEntry.objects.filter(account__user_id=job.owner_id, kind="spend", reference=job_reference(job.uuid))
        .select_related("reversed_by")
        .order_by("created_at", "id")
    )
    return {
        "spends": spends,
        "credits": -sum(entry.amount for entry in spends),
        "covered": sum(entry.covered_gpu_seconds or 0 for entry in spends),
    }


@register.inclusion_tag("credits/_balance.html", takes_context=True)
def credit_balance(context):
    user = context["request"].user
    # Spendable: credit past its expiry is not offered while the beat task catches up.
    return {"balance": spendable_balance(user.pk) if user.is_authenticated else 0}
