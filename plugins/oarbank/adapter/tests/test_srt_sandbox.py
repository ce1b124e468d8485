"""A sandboxed module under ``srt run``: the kind's ``sandbox`` approvals reach the agent and
srt's readiness probe, the module runs confined (its daemon writes the granted directory and
nothing else), and ``srt validate`` refuses a grant the recipe does not approve."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from srt_services.testing.jobs import run_srt, start_srt
from srt_services.testing.survivors import assert_no_survivors

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed"),
]

# start leaves a daemon that writes the granted directory, tries to write outside it, and
# sleeps; status/ready follow the daemon; stop ends it.
SERVICE = r"""#!/usr/bin/python3
import json, os, signal, subprocess, sys
data = os.environ["OARBANK_MODULE_DATA"]
settings = json.load(open(os.environ["OARBANK_SETTINGS_FILE"]))
pidfile = os.path.join(data, "daemon.pid")

def pid():
    try:
        p = int(open(pidfile).read())
        os.kill(p, 0)
        return p
    except (OSError, ValueError):
        return None

op = sys.argv[1]
if op == "start":
    if pid() is None:
        script = (
            f"echo up > {settings['granted']}/marker; "
            f"echo out > {settings['outside']}/escaped 2>/dev/null; exec sleep 300"
        )
        proc = subprocess.Popen(["sh", "-c", script], start_new_session=True,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        open(pidfile, "w").write(str(proc.pid))
    print(json.dumps({"changed": True}))
elif op == "stop":
    p = pid()
    if p is not None:
        os.kill(p, signal.SIGTERM)
    print(json.dumps({"changed": p is not None}))
elif op in ("status", "ready"):
    up = pid() is not None and os.path.exists(os.path.join(settings["granted"], "marker"))
    print(json.dumps({"running": pid() is not None, "ready": up}))
elif op == "fingerprint":
    print(json.dumps({"health": "healthy", "running": pid() is not None}))
elif op == "list_owned":
    print(json.dumps({"objects": []}))
else:
    print(json.dumps({}))
"""


def make_bundle(root: Path, granted: Path) -> Path:
    (root / "bin").mkdir(parents=True)
    script = root / "bin" / "svc"
    script.write_text(SERVICE)
    script.chmod(0o755)
    manifest = {
        "name": "boxed",
        "services": [{"name": "svc", "exec": ["bin/svc"], "lifecycle": "always"}],
        "sandbox": {"paths": [{"path": str(granted), "write": True}]},
    }
    (root / "oarbank-module.json").write_text(json.dumps(manifest))
    return root


def recipe(tmp: Path, bundle: Path, options: dict[str, Any], *more: str) -> Path:
    opts = {"bundle": str(bundle), "service": "svc", "node_id": "n1", **options}
    text = (
        "schema: 2\nname: boxjob\nobservability:\n  metrics: false\nservices:\n"
        f"  - {{name: mod, type: oarbank, stop_grace_seconds: 20, options: {json.dumps(opts)}}}\n"
    )
    text += "".join(f"  - {s}\n" for s in more)
    path = tmp / "job.yaml"
    path.write_text(text)
    return path


def test_a_sandboxed_module_runs_confined_under_srt(tmp_path: Path) -> None:
    granted = tmp_path / "site" / "models"
    granted.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    bundle = make_bundle(tmp_path / "bundle", granted)
    path = recipe(
        tmp_path,
        bundle,
        {
            "settings": {"granted": str(granted), "outside": str(outside)},
            "sandbox": {"grant_paths": [str(tmp_path / "site")]},
        },
        f"{{name: check, terminal: true, after: [mod], command: [test, -e, '{granted}/marker']}}",
    )
    job_dir = tmp_path / "job"
    run = start_srt(["run", str(path)], str(job_dir)).wait(150)
    assert run.proc.returncode == 0, run.log("service_mod")
    assert (granted / "marker").read_text() == "up\n"
    assert not (outside / "escaped").exists()
    assert_no_survivors(str(job_dir))


def test_validate_refuses_a_grant_the_recipe_does_not_approve(tmp_path: Path) -> None:
    granted = tmp_path / "site" / "models"
    bundle = make_bundle(tmp_path / "bundle", granted)
    out = run_srt("validate", str(recipe(tmp_path, bundle, {})))
    assert out.returncode == 2, out.stderr
    assert "services[mod].options.sandbox" in out.stderr
    assert f"path {granted} (read-write) is not inside a path the site approves" in out.stderr
    approved = recipe(tmp_path, bundle, {"sandbox": {"grant_paths": [str(tmp_path)]}})
    assert run_srt("validate", str(approved)).returncode == 0


def test_an_approved_path_must_be_absolute(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path / "bundle", tmp_path / "models")
    out = run_srt("validate", str(recipe(tmp_path, bundle, {"sandbox": {"grant_paths": ["srv"]}})))
    assert out.returncode == 2, out.stderr
    assert "services[mod].options.sandbox.grant_paths" in out.stderr
    assert "must be absolute" in out.stderr
