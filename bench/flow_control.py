"""One web process's memory under clients that take nothing or send too much.

    .venv/bin/python bench/flow_control.py [--seconds 12]

The web process as `make dev` serves it (gpupool/serve.py) on a throwaway PostgreSQL database,
and, in one run:
1. two clients that read only the status line of a notebook's endless answer through the
   session proxy (a stand-in Jupyter that writes 1 MiB after 1 MiB for ever), `--seconds` long;
2. three clients that read only the status line of a 300 MB dataset file, then of a job's
   300 MB checkpoint, then of a zip of that job's folder (made while it is sent);
3. a 400 MB unauthenticated POST /api/v1/jobs/ (Content-Length), and the same chunked;
4. a 300 MB POST to a session host name that names nothing.
Prints the process's resident memory before, at its peak during each, and after.
Goals: a stalled reader leaves the process within 50 MB of where it started; a refused body
grows it by at most 20 MB. Under Daphne (the server before gpupool/serve.py) phase 1 took the
process from 281 to 1,658 MB and phase 3 grew it by 400 MB.
"""

import os
import tempfile
import time
from pathlib import Path

from _common import bench_database, make_user, options

MB = 1024 * 1024


def main():
    args = options(seconds=12.0)

    from django.conf import settings

    from accounts.models import ApiToken
    from interactive import origins
    from interactive.tests.upstream import session_on, upstream_server
    from testing.attacks import large_dataset_file, peak_rss_mb, post_body, rss_mb, stalled_readers
    from testing.servers import portal_processes

    lines = []
    with bench_database(), upstream_server() as (http_port, _ws, _server):
        user = make_user("reader", provision=False)
        _token, key = ApiToken.issue(user, "bench")
        file_path = large_dataset_file(user, 300 * MB)
        session = session_on(user, port=http_port)
        cookie = f"{origins.SESSION_COOKIE}={origins.cookie_value(session.pk, user)}"
        job_root = Path(tempfile.mkdtemp(prefix="bench-jobs-"))
        job = _job_with_a_checkpoint(user, job_root, 300 * MB)
        env = {"DATASET_STORE": str(settings.DATASET_STORE), "SLURM_JOB_ROOT_LOCAL": str(job_root)}
        with portal_processes(extra_env=env) as (base_url, pid):
            port = int(base_url.rsplit(":", 1)[1])
            post_body(port, "/api/v1/jobs/", host="127.0.0.1", size=1024)
            time.sleep(1)
            start = rss_mb(pid)
            lines.append(f"web process at start: {start:.0f} MB")
            host = origins.session_host(session.host_key)
            with stalled_readers(port, "/endless", host=host, headers={"Cookie": cookie}, count=2) as firsts:
                peak = peak_rss_mb(pid, args.seconds)
            lines.append(
                f"2 stalled readers of an endless notebook answer ({firsts[0]}), {args.seconds:.0f} s: "
                f"peak {peak:.0f} MB (+{peak - start:.0f}; goal <= +50)"
            )
            auth = {"Authorization": f"Bearer {key}"}
            with stalled_readers(port, file_path, host="127.0.0.1", headers=auth, count=3) as firsts:
                peak = peak_rss_mb(pid, args.seconds)
            lines.append(
                f"3 stalled downloads of a 300 MB dataset file ({firsts[0]}): "
                f"peak {peak:.0f} MB (+{peak - start:.0f}; goal <= +50)"
            )
            for label, path in (
                ("a job's 300 MB checkpoint", f"/api/v1/jobs/{job.pk}/files/checkpoint.pt"),
                ("a zip of that job's folder", f"/api/v1/jobs/{job.pk}/archive"),
            ):
                with stalled_readers(port, path, host="127.0.0.1", headers=auth, count=3) as firsts:
                    peak = peak_rss_mb(pid, args.seconds)
                grown = peak - start
                lines.append(
                    f"3 stalled downloads of {label} ({firsts[0]}): peak {peak:.0f} MB (+{grown:.0f}; goal <= +50)"
                )
            time.sleep(1)
            lines.append(f"after they closed: {rss_mb(pid):.0f} MB (+{rss_mb(pid) - start:.0f})")
            before = rss_mb(pid)
            for label, host_name, path, size, chunked in (
                (
                    "400 MB unauthenticated POST /api/v1/jobs/ (Content-Length)",
                    "127.0.0.1",
                    "/api/v1/jobs/",
                    400,
                    False,
                ),
                ("400 MB unauthenticated POST /api/v1/jobs/ (chunked)", "127.0.0.1", "/api/v1/jobs/", 400, True),
                (
                    "300 MB POST to a session host that names nothing",
                    origins.session_host("0" * 16),
                    "/api/",
                    300,
                    False,
                ),
            ):
                started = time.perf_counter()
                status, sent = post_body(port, path, host=host_name, size=size * MB, chunked=chunked)
                took = (time.perf_counter() - started) * 1000
                now = rss_mb(pid)
                lines.append(
                    f"{label}: {status} after {sent / MB:.0f} MB sent, {took:.0f} ms; "
                    f"process {now:.0f} MB (+{now - before:.0f}; goal <= +20)"
                )
    print("\n".join(lines))


def _job_with_a_checkpoint(user, job_root: Path, size: int):
    """A finished job of `user` whose directory (under `job_root`, as the web process reads the
    job root) holds a checkpoint of `size` bytes; the files are this process's, as its uid."""
    from jobs.models import Job

    directory = job_root / "bench" / "j"
    directory.mkdir(parents=True)
    with open(directory / "checkpoint.pt", "wb") as checkpoint:
        checkpoint.truncate(size)
    (directory / "stdout.log").write_text("trained\n")
    user.profile.cluster_username, user.profile.cluster_uid = "bench", os.getuid()
    user.profile.save()
    return Job.objects.create(
        owner=user,
        cluster_user="bench",
        state="COMPLETED",
        standard_output="/srv/gpupool/jobs/bench/j/stdout.log",
        standard_error="/srv/gpupool/jobs/bench/j/stdout.log",
    )


if __name__ == "__main__":
    main()
