"""``env_passthrough`` entries: names or ``PREFIX_*``, never srt's own names or the loader
variables srt refuses in ``env``; each problem at its YAML line."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from srt_services.launch.process import service_env

HEAD = "schema: 2\nname: t\nfrontend: {type: none}\nenv_passthrough:\n"


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("'*'", "must be a variable name or a prefix ending in '*' (NCCL_*), got '*'"),
        ("SRT_COOKIE", "names starting with SRT_ are srt's own"),
        ("'SRT_*'", "names starting with SRT_ are srt's own"),
        ("LD_PRELOAD", "LD_PRELOAD changes how every program of the job is loaded"),
        ("'NCCL*_X'", "must be a variable name or a prefix ending in '*' (NCCL_*)"),
        ("'9LIVES'", "must be a variable name or a prefix ending in '*'"),
    ],
)
def test_refused_entries(srt_problem, entry: str, message: str) -> None:
    p = srt_problem(HEAD + f"  - HF_TOKEN\n  - {entry}\n")
    assert p.label == "env_passthrough[1]"
    assert message in p.message
    assert (p.line, p.column) == (6, 5)


def test_good_entries_load(srt_load) -> None:
    loaded = srt_load(HEAD + "  - HF_TOKEN\n  - 'NCCL_*'\n  - LD_LIBRARY_PATH\n")
    assert loaded.recipe.env_passthrough == ["HF_TOKEN", "NCCL_*", "LD_LIBRARY_PATH"]


def test_patterns_never_pass_srt_or_loader_variables() -> None:
    shell = {"SRT_COOKIE": "other-job", "LD_PRELOAD": "x.so", "LD_LIBRARY_PATH": "/l", "S": "1"}
    got = service_env({}, {}, ["S*", "LD_*", "SRT_*"], source=shell)
    assert got == {"LD_LIBRARY_PATH": "/l", "S": "1"}
    # srt's own variables are set after the inherited ones, whatever was passed
    assert service_env({}, {"SRT_COOKIE": "mine"}, ["SRT_COOKIE"], source=shell) == {
        "SRT_COOKIE": "mine"
    }


NAMES = st.from_regex(r"\A[A-Z_][A-Z0-9_]{0,12}\Z")


@given(st.dictionaries(NAMES, st.text(max_size=5), max_size=8), st.lists(NAMES, max_size=4))
def test_a_name_passes_exactly_itself(shell: dict[str, str], names: list[str]) -> None:
    got = service_env({}, {}, names, source=shell)
    for key in shell:
        wanted = key in names or key.startswith("LC_") or key in ("PATH", "HOME", "USER")
        wanted = wanted or key in ("LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "TZ", "TMPDIR")
        assert (key in got) == wanted, key
