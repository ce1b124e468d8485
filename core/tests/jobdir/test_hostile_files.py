"""Issue 31: job files that are not what their names promise. A FIFO, a device, a
directory, a symbolic link out of the job directory or in a loop, JSON nested a hundred
thousand deep, a file larger than srt reads, in place of any job file: every reader refuses
it at once, naming the file and what it is, never waits on it, follows it or raises
anything but an srt error. The job lock is never written through a planted link. Root
reading a user's job directory reads only what that user could.

ID (docs/fault-matrix.md): H21 (files), H22 (the lock), H23 (root on a user's behalf).
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from srt_services import safefile
from srt_services.app.status import status_rows
from srt_services.app.stop import StopRequest, stop_job
from srt_services.errors import SrtError
from srt_services.jobdir.events import read_events
from srt_services.jobdir.layout import JobDir, JobDirError, atomic_write
from srt_services.jobdir.lock import LOCK, JobLock, held
from srt_services.jobdir.reading import MAX_FILE
from srt_services.jobdir.state import encode_state
from srt_services.jobdir.view import JobView

from .test_job_files import _state

ROOT = os.geteuid() == 0
KINDS = ["fifo", "link-out", "link-loop", "directory", "device", "nested", "huge"]
JOB_FILES = ["state.json", "plan.json", "result.json", "job.json", "events.jsonl"]


def plant(path: Path, kind: str, secret: Path) -> None:
    """Put something hostile of ``kind`` at ``path`` (whatever was there goes)."""
    if path.is_symlink() or path.exists():
        path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "link-out":
        path.symlink_to(secret)
    elif kind == "link-loop":
        path.symlink_to(path.name)
    elif kind == "directory":
        path.mkdir()
    elif kind == "device":
        if not ROOT:
            pytest.skip("mknod needs root")
        os.mknod(path, 0o644 | stat.S_IFCHR, os.makedev(1, 5))  # what /dev/zero is
    elif kind == "nested":
        path.write_bytes(b"[" * 100_000 + b"]" * 100_000 + b"\n")
    elif kind == "huge":
        with open(path, "wb") as fh:
            fh.truncate(MAX_FILE + 1)  # sparse: costs no disk
    else:  # pragma: no cover
        raise AssertionError(kind)


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """A file outside every job directory that only root may read."""
    path = tmp_path / "secret"
    path.write_text("root's secret\n")
    path.chmod(0o600)
    return path


@pytest.fixture
def job(tmp_path: Path) -> JobDir:
    job = JobDir(str(tmp_path / "job"))
    job.create()
    Path(job.state_file).write_bytes(encode_state(_state()))
    Path(job.events_file).write_text('{"event": "job_started"}\n')
    return job


def _only_srt_errors(call: Callable[[], Any]) -> str | None:
    try:
        call()
    except SrtError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", JOB_FILES)
def test_H21_every_job_file_reader_refuses_what_is_not_a_file(
    job: JobDir, secret: Path, name: str, kind: str
) -> None:
    plant(Path(job.file(name)), kind, secret)
    if name == "events.jsonl":
        said = _only_srt_errors(lambda: read_events(job.events_file))
        if kind in ("nested", "huge"):
            # streamed a line at a time, a line longer than any event skipped unread
            assert said is None and read_events(job.events_file) == []
            return
    else:
        with pytest.raises(JobDirError) as err:
            JobView.read(job.path)
        said = str(err.value)
    assert said is not None and job.file(name) in said, said
    expected = {
        "fifo": "is a FIFO (named pipe), not a regular file",
        "link-out": f"leads out of {job.path}",
        "link-loop": "is a symbolic link loop",
        "directory": "is a directory, not a regular file",
        "device": "is a character device, not a regular file",
        "nested": "recursion limit exceeded",
        "huge": "is larger than 256 MiB",
    }[kind]
    assert expected in said, said
    assert "root's secret" not in said
    # status and stop answer with that error (or without the file), never hang or raise
    for call in (
        lambda: status_rows(job.path),
        lambda: stop_job(StopRequest(job.path), log=lambda m: None),
    ):
        _only_srt_errors(call)


def test_H21_links_that_stay_inside_the_job_directory_are_followed(job: JobDir) -> None:
    real = Path(job.path) / "state.real.json"
    os.replace(job.state_file, real)
    Path(job.state_file).symlink_to("logs/../state.real.json")
    view = JobView.read(job.path)
    assert view.state is not None and view.state.job_name == _state().job_name


@pytest.mark.parametrize("kind", ["fifo", "link-out", "directory", "device", "huge"])
def test_H21_a_site_config_that_is_not_a_file_is_an_error_at_once(
    tmp_path: Path, secret: Path, kind: str
) -> None:
    from srt_services.site_config import SiteConfigError, load

    path = tmp_path / "site.toml"
    plant(path, kind, secret)
    with pytest.raises(SiteConfigError) as err:
        load(str(path))
    assert str(path) in str(err.value)


def test_H21_a_site_config_nested_too_deeply_is_an_error(tmp_path: Path) -> None:
    from srt_services.site_config import SiteConfigError, load

    path = tmp_path / "site.toml"
    path.write_text("[env]\npassthrough = " + "[" * 50_000 + "]" * 50_000 + "\n")
    with pytest.raises(SiteConfigError, match="nested too deeply"):
        load(str(path))


@pytest.mark.parametrize("kind", ["fifo", "directory", "nested", "link-loop"])
def test_H21_a_plugin_lock_that_is_not_a_file_is_an_error_at_once(
    tmp_path: Path, secret: Path, kind: str
) -> None:
    from srt_services.plugins.lockfile import LockError, read_lock

    path = tmp_path / "plugins.lock"
    plant(path, kind, secret)
    with pytest.raises(LockError) as err:
        read_lock(str(path))
    assert str(path) in str(err.value)


def test_H21_validate_with_a_fifo_as_site_config_does_not_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "site.toml"
    os.mkfifo(fifo)
    recipe = tmp_path / "r.yaml"
    recipe.write_text("schema: 2\nname: x\nobservability: {metrics: false}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SRT_")}
    done = subprocess.run(
        [sys.executable, "-m", "srt_services", "validate", str(recipe)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "SRT_SITE_CONFIG": str(fifo)},
        check=False,
    )
    assert done.returncode == 1, done
    assert "Traceback" not in done.stderr
    assert f"site config {fifo} is a FIFO (named pipe), not a regular file" in done.stderr


# --------------------------------------------------------------------------- the lock


@pytest.mark.parametrize("how", ["symlink", "hardlink", "fifo"])
def test_H22_the_lock_is_never_written_through_what_was_planted(tmp_path: Path, how: str) -> None:
    job = tmp_path / "job"
    job.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    lock_path = job / LOCK
    if how == "symlink":
        lock_path.symlink_to(victim)
    elif how == "hardlink":
        os.link(victim, lock_path)
    else:
        os.mkfifo(lock_path)
    with pytest.raises(JobDirError) as err:
        JobLock(str(job)).acquire()
    assert str(lock_path) in str(err.value)
    assert victim.read_text() == "precious\n"
    assert held(str(job)) is None  # and a reader neither hangs nor follows it


def test_H22_a_temporary_file_planted_for_an_atomic_write_is_not_written_through(
    tmp_path: Path,
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    target = tmp_path / "state.json"
    Path(f"{target}.tmp.{os.getpid()}").symlink_to(victim)
    atomic_write(str(target), b"{}")
    assert victim.read_text() == "precious\n"
    assert target.read_bytes() == b"{}"


# --------------------------------------------------------------------------- root


@pytest.mark.skipif(not ROOT, reason="reading on another user's behalf is root's")
def test_H23_root_reads_a_users_job_directory_as_that_user(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    groups = os.getgroups()
    job = tmp_path / "job"
    job.mkdir()
    (job / "mine.txt").write_text("the user's\n")
    # a file of root's inside the user's directory (a hard link, a file left by root)
    (job / "roots.txt").write_text("root's secret\n")
    (job / "roots.txt").chmod(0o600)
    for path in (job, job / "mine.txt"):
        os.chown(path, 65534, 65534)
    assert safefile.read_beneath(str(job), "mine.txt", 100) == b"the user's\n"
    with pytest.raises(safefile.UnsafeFile, match="permission denied"):
        safefile.read_beneath(str(job), "roots.txt", 100)
    # root's own identity is back afterwards
    assert Path(job / "roots.txt").read_text() == "root's secret\n"
    assert os.getgroups() == groups


# --------------------------------------------------------------------------- fuzzed

CONTENT = st.one_of(
    st.binary(max_size=64),
    st.integers(1, 3000).map(lambda n: b"[" * n + b"]" * n),
    st.integers(1, 3000).map(lambda n: b'{"a":' * n + b"1" + b"}" * n),
    st.sampled_from([b"{}", b"null", b"[]", b'{"version": 1}', b"\xff\xfe", b""]),
)


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_H21_fuzzed_job_directories(tmp_path: Path, secret: Path, data: Any) -> None:
    """Each job file is missing, hostile (any kind above but the slow ones), or arbitrary
    bytes (deep nesting included): readers give an srt error or an answer, nothing else."""
    job = JobDir(str(tmp_path / f"job{os.urandom(4).hex()}"))
    job.create()
    for name in JOB_FILES:
        choice = data.draw(st.sampled_from(["missing", "fifo", "link-out", "link-loop", "bytes"]))
        if choice == "bytes":
            Path(job.file(name)).write_bytes(data.draw(CONTENT))
        elif choice != "missing":
            plant(Path(job.file(name)), choice, secret)
    for call in (
        lambda: JobView.read(job.path),
        lambda: read_events(job.events_file),
        lambda: status_rows(job.path),
        lambda: stop_job(StopRequest(job.path), log=lambda m: None),
    ):
        said = _only_srt_errors(call)
        assert said is None or "root's secret" not in said
