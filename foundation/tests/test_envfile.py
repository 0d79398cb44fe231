"""var/dev.env: what `make dev` leaves so that `manage.py` commands work as the README says."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from foundation.envfile import EnvFileError, load_env_file, parse_env_file

REPO = Path(__file__).resolve().parents[2]


def test_lines_are_names_and_literal_values():
    text = "# comment\n\nDEBUG=1\nSLURM_CLI_PREFIX=chroot /x y\nEMPTY=\n"
    assert parse_env_file(text) == {"DEBUG": "1", "SLURM_CLI_PREFIX": "chroot /x y", "EMPTY": ""}


@pytest.mark.parametrize("line", ["export DEBUG=1", "debug=1", "DEBUG", "$(id)=1"])
def test_anything_else_is_an_error_naming_the_line(line):
    with pytest.raises(EnvFileError, match=":2:"):
        parse_env_file("DEBUG=1\n" + line, "dev.env")


def test_the_environment_wins_over_the_file(tmp_path, monkeypatch):
    env_file = tmp_path / "dev.env"
    env_file.write_text("GPUPOOL_T_A=from-file\nGPUPOOL_T_B=from-file\n")
    monkeypatch.setenv("GPUPOOL_T_A", "from-env")
    monkeypatch.delenv("GPUPOOL_T_B", raising=False)
    assert load_env_file(env_file) == ["GPUPOOL_T_B"]
    assert os.environ["GPUPOOL_T_A"] == "from-env" and os.environ["GPUPOOL_T_B"] == "from-file"
    monkeypatch.delenv("GPUPOOL_T_B")


def _manage(args, env):
    base = {key: value for key, value in os.environ.items() if key in {"PATH", "HOME", "LANG"}}
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=REPO, env={**base, **env}, capture_output=True, text=True, timeout=120
    )


def test_manage_py_reads_the_file_that_make_dev_writes(tmp_path):
    subprocess.run(["bash", str(REPO / "scripts" / "dev-env.sh")], check=True, capture_output=True)
    written = (REPO / "var" / "dev.env").read_text()
    assert "DEBUG=1" in written
    env_file = tmp_path / "dev.env"
    env_file.write_text(written)
    var = {"GPUPOOL_VAR_DIR": str(tmp_path / "var")}
    # Without DEBUG or SECRET_KEY exported, as a newcomer types it after `make dev`.
    assert _manage(["check"], {**var, "GPUPOOL_ENV_FILE": str(env_file)}).returncode == 0
    refused = _manage(["check"], {**var, "GPUPOOL_ENV_FILE": ""})
    assert refused.returncode != 0 and "SECRET_KEY" in refused.stderr
