"""`pip install 'srt-mooncake[server]'` is enough: the venv's own Mooncake is found.

The wheel puts ``mooncake_master`` and ``mc_store_rest_server`` into the venv's ``bin``. The
venv's ``srt`` is run directly (the venv never activated) with a PATH that holds nothing but
bash, so the master and the store that answer must be the venv's, found by srt's look-up.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from srt_services.testing.survivors import assert_no_survivors

pytestmark = pytest.mark.component

VENV_BIN = Path(sys.executable).parent


def test_the_venv_master_and_store_run_without_activation_or_path(
    tmp_path: Path, free_port: Callable[[], int], mooncake: dict[str, str]
) -> None:
    if not all(Path(p).parent == VENV_BIN for p in mooncake.values()):
        pytest.skip("Mooncake is not installed in this venv (pip install 'srt-mooncake[server]')")
    only_bash = tmp_path / "path"
    only_bash.mkdir()
    (only_bash / "bash").symlink_to("/bin/bash")  # what srt runs a preamble with
    rpc, meta, metrics, rest = free_port(), free_port(), free_port(), free_port()
    store = f"http://{{head_ip}}:{rest}"
    client = (
        "import json, urllib.request as u;"
        f"r = u.Request('{store}/api/put', data=json.dumps({{'key': 'k', 'value': 'venv'}}).encode(),"
        " method='PUT', headers={'Content-Type': 'application/json'});"
        "u.urlopen(r).read();"
        f"print('got', u.urlopen('{store}/api/get/k').read().decode())"
    )
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        "schema: 2\nname: venv-mooncake\nfrontend: {type: none}\n"
        "observability: {metrics: false}\nservices:\n"
        f"  - {{name: mooncake-master, type: mooncake-master, placement: {{node: head}},"
        f" options: {{rpc_port: {rpc}, metadata_port: {meta}, metrics_port: {metrics}}}}}\n"
        f"  - {{name: store, type: mooncake-store, placement: {{node: head}},"
        f" options: {{port: {rest}, global_segment_size: 32MB, local_buffer_size: 8MB}}}}\n"
        f"  - {{name: client, terminal: true, command: {json.dumps([sys.executable, '-c', client])}}}\n"
    )
    job = tmp_path / "job"
    env = {"HOME": str(tmp_path), "PATH": str(only_bash), "SRT_SITE_CONFIG": "/dev/null"}
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
        assert (job / "logs" / "service_client.out").read_text().strip() == "got venv"
        master_log = (job / "logs" / "service_mooncake-master.out").read_text()
        assert f"Master service started on port {rpc}" in master_log
    finally:
        assert_no_survivors(str(job))
