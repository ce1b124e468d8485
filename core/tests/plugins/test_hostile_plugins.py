"""Issue 31, item 5: plugins that raise what is not an ``Exception`` at import or in a
hook, plugins whose import never ends, and site and lock files of the wrong shape. Each
plugin is reported as failed and every command still gives its own verdict and exit
status; a user's Ctrl-C still ends the command; a file of the wrong shape is an error
naming the field, from every command, never a traceback.

ID (docs/fault-matrix.md): H30 (what a plugin raises), H31 (a hanging import), H32 (site
and lock files of the wrong shape).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from srt_services.testing.jobs import plugin_env

BAD = """\
schema: 2
name: x
observability: {metrics: false}
services:
  - name: a
    command: ["true"]
    bogus: 1
"""
GOOD = """\
schema: 2
name: x
observability: {metrics: false}
services:
  - name: a
    command: [bash, -c, "echo ran"]
    terminal: true
"""

RAISES = {
    "exit-0": "raise SystemExit(0)\n",
    "exit-text": "import sys\nsys.exit('bye from the plugin')\n",
    "keyboard": "raise KeyboardInterrupt\n",
    "generator-exit": "raise GeneratorExit\n",
    "own-base": "class Boom(BaseException):\n    pass\nraise Boom('boom')\n",
}


def srt(
    tmp_path: Path, env: dict[str, str], *args: str, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    site = tmp_path / "site.toml"
    if not site.exists():
        site.write_text("")
    full = {k: v for k, v in os.environ.items() if not k.startswith("SRT_")}
    full.update(env)
    full.setdefault("SRT_SITE_CONFIG", str(site))
    return subprocess.run(
        [sys.executable, "-m", "srt_services", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=full,
        cwd=tmp_path,
    )


def recipes(tmp_path: Path) -> tuple[str, str]:
    (tmp_path / "bad.yaml").write_text(BAD)
    (tmp_path / "good.yaml").write_text(GOOD)
    return str(tmp_path / "bad.yaml"), str(tmp_path / "good.yaml")


def install(tmp_path: Path, name: str, source: str, provides: str = "") -> dict[str, str]:
    """A plugin ``srt-<name>`` whose module is ``source``; ``provides`` is its
    ``[srt.provides]`` section (empty: it declares nothing)."""
    module = name.replace("-", "_")
    env = plugin_env(tmp_path / "plugins", f"srt-{name}", {module: source}, module)
    if provides:
        info = tmp_path / "plugins" / f"srt_{module}-1.0.0.dist-info"
        (info / "entry_points.txt").write_text(
            f"[srt.plugins]\nsrt-{name} = {module}\n[srt.provides]\n{provides}\n"
        )
    return env


@pytest.mark.parametrize("kind", sorted(RAISES))
def test_H30_a_plugin_raising_anything_at_import_is_a_failed_plugin(
    tmp_path: Path, kind: str
) -> None:
    env = install(tmp_path, kind, RAISES[kind])
    bad, good = recipes(tmp_path)
    refused = srt(tmp_path, env, "validate", bad)
    assert refused.returncode == 2, refused
    assert "services[a].bogus: unknown key" in refused.stderr + refused.stdout
    assert f"plugin srt-{kind} 1.0.0 failed to import: raised " in refused.stderr
    assert "Traceback" not in refused.stderr
    ok = srt(tmp_path, env, "validate", good)
    assert ok.returncode == 0, ok
    assert "good.yaml: ok" in ok.stdout + ok.stderr
    listed = srt(tmp_path, env, "plugins", "list", "--json")
    (row,) = [r for r in json.loads(listed.stdout) if r["name"] == f"srt-{kind}"]
    assert row["status"] == "failed" and row["reason"] == "import failed"


@pytest.mark.parametrize("kind", ["exit-0", "keyboard"])
def test_H30_srt_run_runs_the_job_whatever_a_plugin_raised(tmp_path: Path, kind: str) -> None:
    env = install(tmp_path, kind, RAISES[kind])
    _, good = recipes(tmp_path)
    job = tmp_path / "job"
    done = srt(tmp_path, env, "run", good, "--job-dir", str(job), "--plain")
    assert done.returncode == 0, done.stderr
    assert (job / "logs" / "service_a.out").read_text() == "ran\n"
    assert json.loads((job / "result.json").read_text())["status"] == "succeeded"


def test_H30_a_registration_hook_raising_system_exit_rejects_the_plugin(tmp_path: Path) -> None:
    env = install(
        tmp_path,
        "hookexit",
        "from srt_services.extend import hookimpl\n"
        "@hookimpl\ndef srt_register_service_kinds():\n    raise SystemExit(0)\n",
    )
    bad, _ = recipes(tmp_path)
    done = srt(tmp_path, env, "validate", bad)
    assert done.returncode == 2, done
    assert "srt_register_service_kinds raised SystemExit" in done.stderr
    assert "Traceback" not in done.stderr


HANG = "import time\ntime.sleep(3600)\n"


def test_H31_a_hanging_import_is_given_up_and_the_verdict_given(tmp_path: Path) -> None:
    env = install(tmp_path, "hang", HANG) | {"SRT_PLUGIN_IMPORT_TIMEOUT": "1"}
    bad, good = recipes(tmp_path)
    t0 = time.monotonic()
    refused = srt(tmp_path, env, "validate", bad)
    assert time.monotonic() - t0 < 30
    assert refused.returncode == 2, refused
    assert "plugin srt-hang 1.0.0 failed to import: its import did not finish within 1s" in (
        refused.stderr
    )
    assert srt(tmp_path, env, "validate", good).returncode == 0


def test_H31_a_declared_plugin_is_not_imported_for_a_recipe_that_does_not_need_it(
    tmp_path: Path,
) -> None:
    """No deadline needed: the plugin declares its kind, the recipe uses none of it."""
    env = install(tmp_path, "hang", HANG, "kind.hangkind = hang") | {
        "SRT_PLUGIN_IMPORT_TIMEOUT": "0"  # no limit: were it imported, this would hang
    }
    bad, good = recipes(tmp_path)
    assert srt(tmp_path, env, "validate", bad, timeout=30).returncode == 2
    ok = srt(tmp_path, env, "validate", good, timeout=30)
    assert ok.returncode == 0 and "srt-hang" not in ok.stderr
    # and for one that does, the deadline gives it up with a clear error
    uses = tmp_path / "uses.yaml"
    uses.write_text(GOOD.replace('command: [bash, -c, "echo ran"]', "type: hangkind"))
    env["SRT_PLUGIN_IMPORT_TIMEOUT"] = "1"
    done = srt(tmp_path, env, "validate", str(uses))
    assert done.returncode == 2, done
    assert "did not finish within 1s" in done.stderr


def test_H31_a_users_ctrl_c_during_a_hanging_import_ends_the_command(tmp_path: Path) -> None:
    inside = tmp_path / "importing"
    # the import says when it has begun: a loaded machine may take more than a fixed pause
    # to get there, and a Ctrl-C before it is another case
    marked = f"open({str(inside)!r}, 'w').close()\n{HANG}"
    env = install(tmp_path, "hang", marked) | {"SRT_PLUGIN_IMPORT_TIMEOUT": "60"}
    bad, _ = recipes(tmp_path)
    full = {k: v for k, v in os.environ.items() if not k.startswith("SRT_")}
    full.update(env, SRT_SITE_CONFIG=os.devnull)
    # a terminal's Ctrl-C reaches a command whose SIGINT is not ignored; a test run started
    # in the background by a shell without job control has it ignored, and so would srt
    ignored = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    if ignored:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "srt_services", "validate", bad],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=full,
        )
    finally:
        if ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    deadline = time.monotonic() + 60
    while not inside.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    time.sleep(0.2)  # into its sleep
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()  # a failed test leaves nothing running
        out, err = proc.communicate()
        raise AssertionError(f"Ctrl-C did not end the command: {err[-2000:]}") from None
    assert proc.returncode == 130, (out, err)
    assert "failed to import" not in err


# --------------------------------------------------------------------------- files

LOCK = {
    "srt_plugin_lock": 2,
    "core": "1.0.0",
    "plugins": [{"name": "srt-a", "version": "1.0", "files_sha256": "ab" * 32}],
}
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=6,
)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*prefix, i))
    return out


def _replace(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    copy = dict(doc) if isinstance(doc, dict) else list(doc)
    copy[path[0]] = _replace(doc[path[0]], path[1:], value)
    return copy


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_H32_a_lock_of_any_shape_is_read_or_refused_naming_the_field(data: Any) -> None:
    import tempfile

    from srt_services.plugins.lockfile import LockError, compare, read_lock

    doc: Any = LOCK
    for _ in range(data.draw(st.integers(1, 3))):
        doc = _replace(doc, data.draw(st.sampled_from(_paths(doc))), data.draw(JSON))
    with tempfile.NamedTemporaryFile("w", suffix=".lock", delete=False) as fh:
        fh.write(json.dumps(doc))
    try:
        lock, said = outcome(lambda: read_lock(fh.name), LockError)
    finally:
        os.unlink(fh.name)
    if lock is None:
        assert said is not None and fh.name in said
        return
    compare(lock, lock)  # what a valid-looking lock is used for works
    assert all(isinstance(p.name, str) and isinstance(p.version, str) for p in lock.plugins)


def outcome(call: Callable[[], Any], error: type[Exception]) -> tuple[Any, str | None]:
    """(what ``call`` returned, None), or (None, the message of the ``error`` it raised);
    any other exception propagates (and fails the test)."""
    try:
        return call(), None
    except error as exc:
        return None, str(exc)


TOML_VALUE = st.recursive(
    st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=6,
)
TABLES = {
    "plugins": ["require", "allow", "block", "lock", "strict", "autoload"],
    "slurm": ["partition", "sbatch_extra", "gpus_per_node", "network_interface"],
    "containers": ["aliases", "mounts"],
    "binaries": ["etcd"],
    "env": ["passthrough"],
    "readiness": ["timeout_seconds"],
    "storage": ["node_local"],
}


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_H32_a_site_config_of_any_shape_is_read_or_refused_naming_the_field(data: Any) -> None:
    """Every table, or a value of any TOML type where a table or a field goes."""
    from srt_services.plugins.discovery import Controls
    from srt_services.site_config import SiteConfigError, parse

    doc: dict[str, Any] = {}
    for table in data.draw(st.lists(st.sampled_from(sorted(TABLES)), max_size=3)):
        if data.draw(st.booleans()):
            doc[table] = data.draw(TOML_VALUE)  # a table's place taken by anything
        else:
            keys = data.draw(st.lists(st.sampled_from(TABLES[table]), max_size=3))
            doc[table] = {k: data.draw(TOML_VALUE) for k in keys}
    from srt_services.plugins.lockfile import LockError

    site, said = outcome(lambda: parse(doc, "/etc/srt/site.toml"), SiteConfigError)
    if site is None:
        assert said is not None and "/etc/srt/site.toml" in said
        return
    # what every command does with it next; a lock path naming no file is the lock's error
    outcome(lambda: Controls.from_environment({}, site), LockError)


@pytest.mark.parametrize(
    ("site", "lock", "said"),
    [
        ("[plugins]\nlock = 3\n", None, "plugins.lock must be a string"),
        ("plugins = 3\n", None, "[plugins] must be a table"),
        ('[plugins]\nlock = "p.lock"\n', '{"srt_plugin_lock": 2, "plugins": null}', "plugins"),
        (
            '[plugins]\nlock = "p.lock"\n',
            '{"srt_plugin_lock": 2, "plugins": [{"name": "a", "version": 1}]}',
            "plugins[0].version must be a string, not a number",
        ),
        ('[plugins]\nlock = "p.lock"\n', '{"srt_plugin_lock": 2, "core": {}}', "core must be"),
    ],
)
def test_H32_wrong_shapes_are_errors_from_every_command(
    tmp_path: Path, site: str, lock: str | None, said: str
) -> None:
    (tmp_path / "site.toml").write_text(site)
    if lock is not None:
        (tmp_path / "p.lock").write_text(lock)
    bad, _ = recipes(tmp_path)
    env = {"SRT_SITE_CONFIG": str(tmp_path / "site.toml")}
    for args in (("validate", bad), ("plugins", "list"), ("kinds",)):
        done = srt(tmp_path, env, *args)
        assert done.returncode == 1, (args, done)
        assert "Traceback" not in done.stderr, done.stderr
        assert said in done.stderr, (args, done.stderr)
