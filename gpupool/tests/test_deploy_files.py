"""The production shape's files hold together: nginx accepts the shipped site with its TLS and
proxy includes, the units start what the project runs, and the local script parses."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"


@pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx is installed by scripts/install-system-deps.sh")
def test_nginx_accepts_the_shipped_site(tmp_path):
    # The site as a site would install it, with its certificate and include paths pointed here.
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=gpus.example.org",
         "-keyout", str(tmp_path / "privkey.pem"), "-out", str(tmp_path / "fullchain.pem")],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    site = (DEPLOY / "nginx" / "gpupool.conf").read_text()
    site = site.replace("/etc/letsencrypt/live/gpus.example.org/", f"{tmp_path}/")
    site = site.replace("/etc/letsencrypt/live/sessions.gpus.example.org/", f"{tmp_path}/")
    site = site.replace("/opt/gpupool/deploy/", f"{DEPLOY}/")
    # Ports no test machine needs free: nginx -t only parses and opens the certificate.
    site = site.replace("listen 80;", "listen 127.0.0.1:1080;").replace("listen [::]:80;", "")
    site = site.replace("listen 443 ssl http2;", "listen 127.0.0.1:1443 ssl http2;").replace(
        "listen [::]:443 ssl http2;", ""
    )
    (tmp_path / "site.conf").write_text(site)
    (tmp_path / "nginx.conf").write_text(
        f"pid {tmp_path}/nginx.pid;\nerror_log {tmp_path}/error.log;\nevents {{}}\n"
        f"http {{\n include /etc/nginx/mime.types;\n access_log off;\n include {tmp_path}/site.conf;\n}}\n"
    )
    result = subprocess.run(["nginx", "-t", "-c", str(tmp_path / "nginx.conf")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_the_proxy_sets_its_headers_once_for_every_location():
    # A proxy_set_header inside a location drops all the ones above it (nginx's inheritance):
    # the WebSocket location would then lose X-Forwarded-Proto and the portal would redirect it.
    proxy = (DEPLOY / "nginx" / "gpupool-proxy.conf").read_text()
    locations = re.findall(r"location[^{]*\{([^}]*)\}", proxy)
    assert locations
    assert not any("proxy_set_header" in body for body in locations)
    for header in ("Host", "X-Forwarded-For", "X-Forwarded-Proto", "Upgrade", "Connection"):
        assert re.search(rf"^proxy_set_header {header} ", proxy, re.MULTILINE), header


def test_only_a_process_failure_takes_it_out_of_rotation():
    # The portal's own 503 (PostgreSQL restarting) is an answer for the client. Counted as a
    # failure, it took every web process out of rotation at once: 502 for every page and socket.
    proxy = (DEPLOY / "nginx" / "gpupool-proxy.conf").read_text()
    (next_upstream,) = re.findall(r"^proxy_next_upstream (.*);", proxy, re.MULTILINE)
    assert set(next_upstream.split()) <= {"error", "timeout"}


def test_the_units_run_the_projects_processes():
    units = {path.name: path.read_text() for path in (DEPLOY / "systemd").glob("*.service")}
    assert "-m gpupool.serve " in units["gpupool-web@.service"]
    assert "-A gpupool worker" in units["gpupool-worker@.service"]
    assert "-A gpupool beat" in units["gpupool-beat.service"]
    for name, text in units.items():
        assert "EnvironmentFile=/etc/gpupool/production.env" in text, name
        assert "PartOf=gpupool.target" in text, name


def test_the_local_production_script_parses():
    result = subprocess.run(["bash", "-n", str(DEPLOY / "local-production.sh")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
