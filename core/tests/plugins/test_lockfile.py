"""Lock files: reading, writing and comparing, without any installed plugin."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from srt_services.plugins.lockfile import (
    Lock,
    LockedPlugin,
    LockError,
    compare,
    read_lock,
    write_lock,
)


def lock(core: str, *plugins: tuple[str, str, str | None]) -> Lock:
    return Lock(plugins=[LockedPlugin(*p) for p in plugins], core_version=core)


def test_write_then_read_is_identity(tmp_path: Path) -> None:
    original = lock("1.0.0", ("srt-b", "2.0", "ab" * 32), ("srt-a", "1.0", None))
    path = tmp_path / "x.lock"
    write_lock(str(path), original)
    again = read_lock(str(path))
    assert {p.name: p.version for p in again.plugins} == {"srt-a": "1.0", "srt-b": "2.0"}
    assert again.core_version == "1.0.0"
    assert [p["name"] for p in json.loads(path.read_text())["plugins"]] == ["srt-a", "srt-b"]
    assert not list(tmp_path.glob(".srt-lock-*")), "temporary file left behind"


def test_compare_names_every_kind_of_change() -> None:
    old = lock("1.0.0", ("srt-a", "1.0", "h1"), ("srt-b", "1.0", "h2"), ("srt-c", "1.0", "h3"))
    new = lock("1.1.0", ("SRT_A", "1.0.0", "h1"), ("srt-b", "1.1", "h2"), ("srt-d", "0.1", "h4"))
    rendered = [d.render() for d in compare(old, new)]
    assert rendered == [
        "~ srt-services 1.0.0 -> 1.1.0: version changed",
        "~ srt-b 1.0 -> 1.1: version changed",
        "- srt-c 1.0: in the lock, not installed",
        "+ srt-d 0.1: installed, not in the lock",
    ]
    changed = lock(
        "1.0.0", ("srt-a", "1.0", "other"), ("srt-b", "1.0", "h2"), ("srt-c", "1.0", "h3")
    )
    assert [d.change for d in compare(old, changed)] == ["files"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "cannot read"),
        ('{"srt_plugin_lock": 99}', "is not an srt plugin lock"),
        ('{"srt_plugin_lock": 2, "plugins": [{"version": "1"}]}', "every plugin needs a name"),
    ],
)
def test_bad_lock_files_are_clear_errors(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.lock"
    path.write_text(text)
    with pytest.raises(LockError, match=message):
        read_lock(str(path))
    with pytest.raises(LockError, match="does not exist"):
        read_lock(str(tmp_path / "missing.lock"))


def test_a_format_1_lock_pins_names_and_versions_but_not_record_hashes(tmp_path: Path) -> None:
    path = tmp_path / "old.lock"
    path.write_text(
        '{"srt_plugin_lock": 1, "core": "1.0.0", "plugins":'
        ' [{"name": "srt-a", "version": "1.0", "record_sha256": "' + "ab" * 32 + '"}]}'
    )
    old = read_lock(str(path))
    assert old.format == 1
    assert old.plugins == [LockedPlugin("srt-a", "1.0", None)]
    # Its RECORD hash cannot be compared with a files hash: only versions count.
    assert compare(old, lock("1.0.0", ("srt-a", "1.0", "cd" * 32))) == []
    assert json.loads(old.to_json())["srt_plugin_lock"] == 2
