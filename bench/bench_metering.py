"""Metering a month of accounting: 100,000 slurmdbd records through billing.usage.metering's code
path (parsed records -> usage records -> charged to drafts), on PostgreSQL.

    .venv/bin/python bench/bench_metering.py [--records 100000] [--users 200] [--pass-size 5000]

Records are synthetic AccountingRecords made from the captured v0.0.41 payloads (a GPU job
with an NVMe cache, a shard job, a requeued job's runs), spread over one month and over users
on the Free, Pro and Enterprise plans; a quarter of the GPU runs hold all four GPUs of their
node, so their memory is looked up in telemetry (no samples: the lookup's cost, source
"none"). They are metered in passes of --pass-size, as beat would over a month, then the
whole month again (a re-run writes nothing). Prints the time per 1,000 records and in total,
for writing and for charging.
"""

import json
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from _common import BASE_DIR, bench_database, make_user, options

PAYLOADS = Path(BASE_DIR) / "cluster" / "tests" / "payloads" / "v0.0.41"
MONTH_START = datetime(2026, 3, 1, tzinfo=UTC)


def templates():
    from cluster.slurmrest.v0041 import V0041Adapter

    adapter = V0041Adapter()
    found = []
    for name in ("accounting_gpu_nvme", "accounting_shard", "accounting_requeued"):
        found += adapter.decode_accounting(json.loads((PAYLOADS / f"{name}.json").read_text())["body"])
    return [record for record in found if record.run_is_settled]


def synthetic_records(count: int, user_names: list[str]):
    base = templates()
    month_seconds = 30 * 24 * 3600
    records = []
    for n in range(count):
        template = base[n % len(base)]
        seconds = 60 + (n * 37) % 7200
        start = MONTH_START + timedelta(seconds=(n * 2593) % (month_seconds - 7200))
        tres = dict(template.allocated_tres)
        nodes = template.nodes
        if template.gpu_count and n % 4 == 0:
            # All four A100s of a node: the run's GPUs are known, telemetry is asked.
            tres = {**tres, "gres/gpu": 4, "gres/gpu:a100": 4}
            tres = {key: value for key, value in tres.items() if "rtx4090" not in key}
            nodes = f"bench-a100-{n % 50:02d}"
        records.append(
            replace(
                template,
                job_id=1_000_000 + n,
                user_name=user_names[n % len(user_names)],
                start_time=start,
                end_time=start + timedelta(seconds=seconds),
                elapsed_seconds=seconds,
                allocated_tres=tres,
                nodes=nodes,
            )
        )
    return records


def main():
    args = options(records=100_000, users=200, pass_size=5000)

    from billing.actions import charging
    from billing.models import Invoice, UsageRecord
    from billing.usage import metering
    from cluster.models import Node

    with bench_database():
        plans = ("pro", "enterprise", "free")
        names = []
        for n in range(args.users):
            user = make_user(f"meter{n}", plan=plans[n % 3], provision=False)
            user.profile.cluster_username = f"bench{n}"
            user.profile.save(update_fields=["cluster_username"])
            names.append(f"bench{n}")
        Node.objects.bulk_create(
            Node(name=f"bench-a100-{n:02d}", state="IDLE", gpus=[{"type": "a100", "count": 4, "used_indexes": []}])
            for n in range(50)
        )
        # The credits ledger is another issue's: its seam is measured, not its ledger.
        charging.apply_credits = lambda *args: (0, None)
        records = synthetic_records(args.records, names)

        started = time.perf_counter()
        written = charged = 0
        write_time = charge_time = 0.0
        for offset in range(0, len(records), args.pass_size):
            batch = records[offset : offset + args.pass_size]
            original = metering.charge_pending
            timing = {}

            def timed_charge(limit=metering.CHARGES_PER_PASS, _original=original, _timing=timing):
                began = time.perf_counter()
                result = _original(limit)
                _timing["charge"] = time.perf_counter() - began
                return result

            metering.charge_pending = timed_charge
            began = time.perf_counter()
            result = metering.meter_records(batch, cluster="bench")
            total = time.perf_counter() - began
            metering.charge_pending = original
            charge_time += timing["charge"]
            write_time += total - timing["charge"]
            written += result.written
            charged += result.charged
        elapsed = time.perf_counter() - started
        thousands = args.records / 1000
        print(f"{args.records} records -> {written} usage records, {charged} charged, "
              f"{Invoice.objects.count()} draft invoices")  # fmt: skip
        per_thousand = {name: value / thousands * 1000 for name, value in
                        (("all", elapsed), ("write", write_time), ("charge", charge_time))}  # fmt: skip
        print(f"total: {elapsed:.1f} s; per 1,000 records: {per_thousand['all']:.0f} ms "
              f"(reading, writing {per_thousand['write']:.0f} ms; "
              f"charging {per_thousand['charge']:.0f} ms)")  # fmt: skip

        began = time.perf_counter()
        again = metering.meter_records(records, cluster="bench")
        rerun = time.perf_counter() - began
        assert again.written == 0 and again.charged == 0
        assert UsageRecord.objects.filter(cluster="bench").count() == written
        print(f"re-metering the whole month: {rerun:.1f} s ({rerun / thousands * 1000:.0f} ms per 1,000), "
              f"0 written, 0 charged")  # fmt: skip


if __name__ == "__main__":
    main()
