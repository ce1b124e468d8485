"""The kind-defaults table of ``docs/differences.md`` is what the installed kinds say.

Each kind's defaults (placement, phase, command, ports, readiness, what implies it, what it
tells other processes) and its departures from the specification are rendered from the
kind itself, so a default that changes without the page changing fails here and in CI's
lint environment (``python -m srt_services.docs_kinds --check``)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import ClassVar

import pytest
from srt_services import docs_kinds
from srt_services.app import compose
from srt_services.contracts.kind import ServiceKind
from srt_services.plugins.manager import PluginSet


def _installed() -> PluginSet:
    return compose.setup().plugins


def test_the_page_holds_what_the_kinds_say(repo: Path) -> None:
    plugins = _installed()
    missing = [k for k in docs_kinds.FIRST_PARTY if k not in plugins.kinds()]
    if missing:
        pytest.skip(f"first-party kinds not installed here: {', '.join(missing)}")
    page = (repo / "docs" / "differences.md").read_text(encoding="utf-8")
    assert docs_kinds.render(page, plugins) == page, (
        "docs/differences.md is stale: run `python -m srt_services.docs_kinds --write`"
    )


class _Etcd(ServiceKind):
    name: ClassVar[str] = "etcd"
    summary: ClassVar[str] = "a stand-in"
    default_start: ClassVar[str] = "infra"
    default_critical: ClassVar[bool] = True
    default_placement: ClassVar[str] = "infra"
    readiness_summary: ClassVar[str] = "tcp 2379"


class _Plugins:
    """Just what the generator asks of a plugin set: the kinds by name."""

    def __init__(self, kinds: dict[str, ServiceKind]) -> None:
        self._kinds = kinds

    def kinds(self) -> dict[str, ServiceKind]:
        return self._kinds


def _stand_ins(**etcd: object) -> _Plugins:
    kinds: dict[str, ServiceKind] = {}
    for name in docs_kinds.FIRST_PARTY:
        cls = type(f"K_{name}", (ServiceKind,), {"name": name, "summary": "s"})
        kinds[name] = cls()
    kinds["etcd"] = type("E", (_Etcd,), dict(etcd))()
    return _Plugins(kinds)


def _page(plugins: _Plugins) -> str:
    empty = f"# x\n\n{docs_kinds.BEGIN}\n{docs_kinds.END}\n\ntail\n"
    return docs_kinds.render(empty, plugins)  # type: ignore[arg-type]


def test_a_changed_default_makes_the_page_stale() -> None:
    page = _page(_stand_ins())
    assert "| `etcd` | infra | infra | yes |" in page and page.endswith("\n\ntail\n")
    moved = _stand_ins(default_placement="head")
    assert docs_kinds.render(page, moved) != page  # type: ignore[arg-type]
    # a new reason is a change of the page too
    reasoned = _stand_ins(spec_departures={"readiness": "because"})
    assert "| `etcd` | readiness | because |" in docs_kinds.render(page, reasoned)  # type: ignore[arg-type]


def test_a_departure_must_name_a_column() -> None:
    with pytest.raises(SystemExit, match="names no column"):
        _page(_stand_ins(spec_departures={"readines": "typo"}))


def test_every_first_party_kind_must_be_there() -> None:
    plugins = _stand_ins()
    kinds = copy.copy(plugins.kinds())
    del kinds["ray"]
    with pytest.raises(SystemExit, match="ray"):
        _page(_Plugins(kinds))


def test_check_mode_reports_a_stale_page(tmp_path: Path, repo: Path) -> None:
    plugins = _installed()
    if any(k not in plugins.kinds() for k in docs_kinds.FIRST_PARTY):
        pytest.skip("first-party kinds not installed here")
    (tmp_path / "docs").mkdir()
    page = (repo / "docs" / "differences.md").read_text(encoding="utf-8")
    (tmp_path / "docs" / "differences.md").write_text(
        page.replace("| `etcd` | infra", "| `etcd` | head")
    )
    assert docs_kinds.main(["--check", "--root", str(tmp_path)]) == 1
    assert docs_kinds.main(["--write", "--root", str(tmp_path)]) == 0
    assert docs_kinds.main(["--check", "--root", str(tmp_path)]) == 0
