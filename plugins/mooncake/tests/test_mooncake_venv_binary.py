"""`pip install 'srt-mooncake[server]'` is enough: the venv's own Mooncake is found.

The wheel puts ``mooncake_master`` and ``mc_store_rest_server`` into the venv's ``bin``. The
venv's ``srt`` is run directly (the venv never activated) with a PATH that holds nothing but
bash, so the master and the store that answer must be the venv's, found by srt's look-up.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from srt_services.testing.jobs import run_venv_srt

pytestmark = pytest.mark.component


def test_the_venv_master_and_store_run_without_activation_or_path(
    tmp_path: Path, srt_free_port: Callable[[], int], mooncake: dict[str, str]
) -> None:
    if not all(Path(p).parent == Path(sys.executable).parent for p in mooncake.values()):
        pytest.skip("Mooncake is not installed in this venv (pip install 'srt-mooncake[server]')")
    rpc, meta, metrics, rest = srt_free_port(), srt_free_port(), srt_free_port(), srt_free_port()
    store = f"http://{{head_ip}}:{rest}"
    client = (
        "import json, urllib.request as u;"
        f"r = u.Request('{store}/api/put', data=json.dumps({{'key': 'k', 'value': 'venv'}}).encode(),"
        " method='PUT', headers={'Content-Type': 'application/json'});"
        "u.urlopen(r).read();"
        f"print('got', u.urlopen('{store}/api/get/k').read().decode())"
    )
    run = run_venv_srt(
        "schema: 2\nname: venv-mooncake\nfrontend: {type: none}\n"
        "observability: {metrics: false}\nservices:\n"
        f"  - {{name: mooncake-master, type: mooncake-master, placement: {{node: head}},"
        f" options: {{rpc_port: {rpc}, metadata_port: {meta}, metrics_port: {metrics}}}}}\n"
        f"  - {{name: store, type: mooncake-store, placement: {{node: head}},"
        f" options: {{port: {rest}, global_segment_size: 32MB, local_buffer_size: 8MB}}}}\n"
        f"  - {{name: client, terminal: true, command: {json.dumps([sys.executable, '-c', client])}}}\n",
        tmp_path,
    )
    assert run.code == 0, run.stdout + run.stderr
    assert run.log("service_client").strip() == "got venv"
    assert f"Master service started on port {rpc}" in run.log("service_mooncake-master")
