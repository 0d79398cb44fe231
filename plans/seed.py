"""Putting docs/product.md's plans into an empty catalogue: the data migration does it once; the
test suite does it again after transactional tests have emptied every table."""

from __future__ import annotations

from plans.product_plans import PRODUCT_PLANS


def seed_product_plans(plan_model, gpu_type_model) -> int:
    """Create the plans that do not exist yet (an admin's edits to existing ones are kept);
    the models are parameters so the migration can pass its historical ones."""
    created_count = 0
    # A migration's historical model may predate some fields: seed only the ones it has.
    known = {model_field.name for model_field in plan_model._meta.get_fields()}
    for spec in PRODUCT_PLANS:
        fields = {key: value for key, value in spec.items() if key in known and key not in {"code", "gpu_types"}}
        plan, created = plan_model.objects.get_or_create(code=spec["code"], defaults=fields)
        if not created:
            continue
        created_count += 1
        for gpu_type, concurrent, hours, rate in spec["gpu_types"]:
            gpu_type_model.objects.create(
                plan=plan, gpu_type=gpu_type, max_concurrent=concurrent, included_hours=hours, rate_per_second=rate
            )
    return created_count
