"""The credit pages at 1,000 and at 1,000,000 ledger entries: queries per request (must not
grow) and time (within 2x).

    DATABASE_URL=postgres://gpupool:gpupool@127.0.0.1:5432/gpupool_credits \\
        .venv/bin/python bench/bench_credits.py [--entries 1000000] [--repeat 30]

Worst case for the balance: one user holds every entry (grants and spends of one campaign,
spread over a year). Pages measured in-process (Django test client): the user's credits page,
the dashboard, GET /api/v1/credits/, and marketing's campaign list and campaign page (the
campaign has 1,000 members at both sizes). Entries are inserted with one INSERT ... SELECT and
the daily rollups built from them as credits.actions.ledger keeps them.
"""

import statistics
import time

from _common import bench_database, count_queries, describe, make_user, options

PAGES = {
    "credits page": "/credits/",
    "dashboard": "/",
    "credits API": "/api/v1/credits/",
}
MARKETING_PAGES = {"campaign list": "/marketing/campaigns/", "campaign page": "/marketing/campaigns/{campaign}/"}

FILL = """
INSERT INTO credits_ledgerentry
    (account_id, kind, amount, idempotency_key, created_at, expires_at, grant_kind, campaign_id,
     gpu_type, reference, reason, covered_gpu_seconds, gpu_seconds)
SELECT %(account)s,
       CASE WHEN n %% 2 = 0 THEN 'grant' ELSE 'spend' END,
       CASE WHEN n %% 2 = 0 THEN 10 ELSE -9 END,
       %(prefix)s || n,
       now() - make_interval(days => (n %% 365)::int, secs => (n %% 86400)::double precision),
       CASE WHEN n %% 2 = 0 THEN now() + interval '90 days' END,
       CASE WHEN n %% 2 = 0 THEN 'signup' ELSE '' END,
       CASE WHEN n %% 2 = 0 THEN %(campaign)s END,
       CASE WHEN n %% 2 = 0 THEN '' ELSE 'rtx4090' END,
       '', '',
       CASE WHEN n %% 2 = 0 THEN NULL ELSE 9 END,
       CASE WHEN n %% 2 = 0 THEN NULL ELSE 9 END
FROM generate_series(1, %(count)s) AS n
"""
ROLLUP = """
INSERT INTO credits_campaignday (campaign_id, day, signups, verified, activated, granted, spent, expired, reversed)
SELECT %(campaign)s, created_at::date, 0, 0, 0,
       SUM(CASE WHEN kind = 'grant' THEN amount ELSE 0 END), SUM(CASE WHEN kind = 'spend' THEN -amount ELSE 0 END), 0, 0
FROM credits_ledgerentry WHERE account_id = %(account)s GROUP BY created_at::date
"""


def fill(size: int, label: str):
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.db.models import Sum

    from credits.actions import ledger
    from credits.models import Campaign, CampaignDay, CreditAccount, Enrollment, LedgerEntry

    user = make_user(f"heavy{label}", plan="pro", provision=False)
    account = ledger.account_for(user.pk)
    campaign = Campaign.objects.create(name=f"Bench {label}", code=f"bench-{label}", start="2020-01-01T00:00Z")
    with connection.cursor() as cursor:
        cursor.execute(
            FILL, {"account": account.pk, "prefix": f"bench:{label}:", "campaign": campaign.pk, "count": size}
        )
        cursor.execute(ROLLUP, {"campaign": campaign.pk, "account": account.pk})
        cursor.execute("ANALYZE credits_ledgerentry")
    total = LedgerEntry.objects.filter(account=account).aggregate(total=Sum("amount"))["total"]
    CreditAccount.objects.filter(pk=account.pk).update(balance=total)
    members = get_user_model().objects.bulk_create(
        get_user_model()(username=f"m{label}-{n}", email=f"m{label}-{n}@example.org") for n in range(1000)
    )
    Enrollment.objects.bulk_create(Enrollment(user=member, campaign=campaign) for member in members)
    CampaignDay.objects.filter(campaign=campaign).update(signups=3)
    return user, campaign


def measure(pairs: dict, repeat: int) -> dict:
    """Queries of one request and `repeat` timings for each (size -> (client, url)); sizes are
    requested in turn, so a change in the machine's load falls on both alike."""
    queries, times = {}, {size: [] for size in pairs}
    for size, (client, url) in pairs.items():
        assert client.get(url).status_code == 200, url  # warm up
        with count_queries() as counter:
            client.get(url)
        queries[size] = counter["queries"]
    for _ in range(repeat):
        for size, (client, url) in pairs.items():
            started = time.perf_counter()
            client.get(url)
            times[size].append(time.perf_counter() - started)
    return {size: (queries[size], times[size]) for size in pairs}


def main():
    args = options(entries=1_000_000, repeat=30)

    from django.test import Client

    from accounts.models import Role
    from credits.actions import ledger

    with bench_database():
        marketer = make_user("benchmarketing", plan="free", provision=False, role=Role.MARKETING)
        marketing = Client()
        marketing.force_login(marketer)
        sizes = (1000, args.entries)
        owners, campaigns = {}, {}
        for size in sizes:
            started = time.perf_counter()
            user, campaigns[size] = fill(size, str(size))
            assert ledger.balance(user.pk) == ledger.sum_of_entries(user.pk)
            print(f"{size} entries inserted in {time.perf_counter() - started:.1f} s")
            owners[size] = Client()
            owners[size].force_login(user)
        for name, url in PAGES.items():
            report(name, measure({size: (owners[size], url) for size in sizes}, args.repeat), sizes)
        for name, url in MARKETING_PAGES.items():
            pairs = {size: (marketing, url.format(campaign=campaigns[size].pk)) for size in sizes}
            report(name, measure(pairs, args.repeat), sizes)


def report(name: str, results: dict, sizes) -> None:
    for size in sizes:
        queries, times = results[size]
        print(f"{size} entries {name}: queries={queries} " + describe("time", times))
    (small_q, small_t), (large_q, large_t) = results[sizes[0]], results[sizes[1]]
    ratio = statistics.median(large_t) / statistics.median(small_t)
    print(f"RATIO {name} ({sizes[1]} / {sizes[0]} entries): queries {small_q} -> {large_q}, time {ratio:.2f}")


if __name__ == "__main__":
    main()
