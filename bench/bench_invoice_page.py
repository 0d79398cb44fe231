"""The invoice page's queries and time at 10 and at 10,000 lines (they must not grow), and
the time to build a draft's lines from 10,000 usage records (aggregated in SQL).

    .venv/bin/python bench/bench_invoice_page.py [--lines 10000] [--repeat 30]

In-process (Django test client, no network) on PostgreSQL: the page's query and rendering
cost, not HTTP. The page shows 100 lines at a time; the first page is measured.
"""

import statistics
import time
from datetime import date, datetime, timedelta
from decimal import Decimal

from _common import bench_database, count_queries, describe, make_user, options


def main():
    args = options(lines=10_000, repeat=30)

    from django.test import Client
    from django.utils import timezone

    from billing.actions import invoicing
    from billing.models import Invoice, InvoiceLine, UsageRecord

    with bench_database():
        user = make_user("invoices", plan="enterprise", provision=False)
        results = {}
        for index, size in enumerate((10, args.lines)):
            invoice = Invoice.objects.create(user=user, period=date(2020 + index, 1, 1))
            InvoiceLine.objects.bulk_create(
                (
                    InvoiceLine(
                        invoice=invoice,
                        position=n,
                        kind="gpu",
                        gpu_type="a100",
                        description=f"A100 GPU time, line {n}",
                        quantity=Decimal(3600),
                        unit="GPU-s",
                        unit_price=Decimal("0.0025"),
                        amount=Decimal("9.00"),
                    )
                    for n in range(1, size + 1)
                ),
                batch_size=5000,
            )
            client = Client()
            client.force_login(user)
            url = f"/billing/invoices/{invoice.pk}/"
            assert client.get(url).status_code == 200  # warm up
            with count_queries() as counter:
                client.get(url)
            times = []
            for _ in range(args.repeat):
                started = time.perf_counter()
                client.get(url)
                times.append(time.perf_counter() - started)
            results[size] = (counter["queries"], times)
            print(f"{size} lines: queries={counter['queries']} " + describe("page", times))
        (small_queries, small_times), (large_queries, large_times) = results[10], results[args.lines]
        print(f"RATIO queries ({args.lines} / 10 lines): {large_queries / small_queries:.2f}")
        print(f"RATIO page time: {statistics.median(large_times) / statistics.median(small_times):.2f}")

        # A draft built from 10,000 usage records: one aggregate query, not a row per record.
        draft = Invoice.objects.create(user=user, period=date(2026, 3, 1))
        end = datetime(2026, 3, 20, tzinfo=timezone.get_current_timezone())
        UsageRecord.objects.bulk_create(
            (
                UsageRecord(
                    cluster="bench",
                    slurm_job_id=n,
                    run_start=end - timedelta(seconds=3600),
                    run_end=end,
                    gpu_type=("a100", "h100", "rtx4090")[n % 3],
                    user=user,
                    state="COMPLETED",
                    seconds=3600,
                    gpu_count=1,
                    gpu_seconds=3600,
                    invoice=draft,
                    charged_at=end,
                    plan="enterprise",
                    gpu_price=Decimal("0.0025"),
                    billable_gpu_seconds=3600,
                    amount_gpu=Decimal("9"),
                    amount=Decimal("9"),
                )
                for n in range(args.lines)
            ),
            batch_size=5000,
        )
        with count_queries() as counter:
            started = time.perf_counter()
            invoicing.refresh_draft(draft.pk)
            elapsed = time.perf_counter() - started
        lines = InvoiceLine.objects.filter(invoice=draft).count()
        figures = f"{elapsed * 1000:.1f} ms, queries={counter['queries']}, lines={lines}"
        print(f"refresh_draft from {args.lines} records: {figures}")


if __name__ == "__main__":
    main()
