"""A lock's identity of an installed plugin: its files, not the installer's records.

pip writes ``REQUESTED`` and ``direct_url.json`` into a distribution (and lists them in its
RECORD) depending on how the very same wheel was asked for, so a hash of RECORD changes on a
harmless reinstall and misses an edited file. The identity srt locks is a hash of the
installed files' content; these tests install one real wheel with pip in two ways.
"""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import distgen
from dummies import DUMMIES
from srt_services.plugins.discovery import files_hash_of


def _pip_install(target: Path, *args: str) -> metadata.Distribution:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-index",
            "--no-deps",
            "--no-compile",
            "--disable-pip-version-check",
            "--target",
            str(target),
            *args,
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    (info,) = target.glob("srt_good-*.dist-info")
    return metadata.Distribution.at(info)


def test_the_same_wheel_installed_two_ways_is_the_same_plugin(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheel = distgen.wheel(wheels, DUMMIES["good"])
    by_file = _pip_install(tmp_path / "a", str(wheel))  # a path: direct_url.json is written
    by_name = _pip_install(tmp_path / "b", "--find-links", str(wheels), "srt-good")
    # What a RECORD hash saw: two different records for one wheel.
    assert by_file.read_text("direct_url.json") is not None
    assert by_name.read_text("direct_url.json") is None
    assert by_file.read_text("RECORD") != by_name.read_text("RECORD")
    identity = files_hash_of(by_file)
    assert identity is not None
    assert identity == files_hash_of(by_name)
    # Byte code written later (by the first import) is not part of the identity either.
    cache = tmp_path / "a" / "srt_good" / "__pycache__"
    cache.mkdir()
    (cache / "plugin.cpython-311.pyc").write_bytes(b"\0")
    assert files_hash_of(by_file) == identity


def test_an_edited_or_deleted_installed_file_changes_the_identity(tmp_path: Path) -> None:
    dist = _pip_install(tmp_path / "a", str(distgen.wheel(tmp_path / "w", DUMMIES["good"])))
    identity = files_hash_of(dist)
    module = tmp_path / "a" / "srt_good" / "plugin.py"
    original = module.read_text()
    module.write_text(original.replace("hello from srt-good", "hello from someone else"))
    edited = files_hash_of(dist)
    assert edited != identity
    module.write_text(original)
    assert files_hash_of(dist) == identity
    module.unlink()
    assert files_hash_of(dist) not in {identity, edited}
