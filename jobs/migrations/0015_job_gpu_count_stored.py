"""`Job.gpu_count` becomes the one count of a job's GPUs (jobs/models.py): rows written before
held slurmdbd's figure for finished jobs only, so each row's count is taken as the portal read it
then: the allocation's GPUs, slurmdbd's count, the GPUs a shard job's shares sit on, the request."""

from django.db import migrations

from cluster.records.gres import gpus_held, parse_tres


def count_every_row(apps, schema_editor):
    Job = apps.get_model("jobs", "Job")
    changed = []
    rows = Job.objects.only("pk", "gpu_count", "allocated_tres", "gpu_allocation", "tres_per_node")
    for job in rows.iterator(chunk_size=2000):
        if job.gpu_count and not parse_tres(job.allocated_tres).get("gres/gpu"):
            continue  # slurmdbd's count of a finished run, which the allocation did not override
        count = gpus_held(job.allocated_tres, job.gpu_allocation, job.tres_per_node)
        if count != job.gpu_count:
            job.gpu_count = count
            changed.append(job)
        if len(changed) >= 2000:
            Job.objects.bulk_update(changed, ["gpu_count"])
            changed = []
    Job.objects.bulk_update(changed, ["gpu_count"])


class Migration(migrations.Migration):
    dependencies = [("jobs", "0014_job_moves")]

    operations = [migrations.RunPython(count_every_row, migrations.RunPython.noop)]
