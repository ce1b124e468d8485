"""Every load-time rule of the lmcache-server kind, with the YAML line it is reported at."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from srt_services.testing import LoadedRecipe, RecipeError

Load = Callable[[str], LoadedRecipe]

HEAD = """\
schema: 2
name: v
engine: {type: vllm}
observability: {metrics: false}
frontend: {type: vllm, command: [f]}
roles:
  decode: {command: [w], connector: lmcache-mp}
services:
"""


def errors(load: Load, text: str) -> list[str]:
    with pytest.raises(RecipeError) as info:
        load(text)
    return [p.render("recipe.yaml") for p in info.value.errors]


def warnings(load: Load, text: str) -> list[str]:
    return [w.render("recipe.yaml") for w in load(text).warnings]


def test_the_implied_server_alone_is_valid(srt_load: Load) -> None:
    loaded = srt_load(HEAD.removesuffix("services:\n"))
    assert loaded.warnings == []
    (server,) = loaded.services
    assert (server.name, server.placement, server.start, server.critical) == (
        "lmcache-server", "decode", "before_workers", True,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ("{l1_size_gb: 0}", "services[lmcache-server].options.l1_size_gb: must be greater than 0"),
        (
            "{eviction_policy: FIFO}",
            "services[lmcache-server].options.eviction_policy: must be one of LRU, ARC,"
            " IsolatedLRU, noop; got 'FIFO'",
        ),
        ("{port: 8751}", "options.http_port: must differ from port (8751): lmcache binds both"),
        ("{host: ' '}", "services[lmcache-server].options.host: must not be blank"),
        ("{hostname: x}", "type 'lmcache-server' does not understand this option"),
    ],
)
def test_bad_options(srt_load: Load, options: str, message: str) -> None:
    (found,) = errors(srt_load, HEAD + f"  - {{name: lmcache-server, options: {options}}}\n")
    assert found.startswith("recipe.yaml:9:")
    assert message in found


@pytest.mark.parametrize("flag", ["--port", "--http-port=9", "--host", "--http-host"])
def test_args_may_not_move_the_ports_srt_owns(srt_load: Load, flag: str) -> None:
    (found,) = errors(srt_load, HEAD + f"  - {{name: lmcache-server, args: ['{flag}', '1']}}\n")
    name = flag.split("=", maxsplit=1)[0]
    assert f"services[lmcache-server].args: {name} is set by srt from options" in found


def test_args_may_move_them_under_a_command_of_its_own(srt_load: Load) -> None:
    text = HEAD + "  - {name: lmcache-server, command: [lmcache, server], args: [--port, '1']}\n"
    assert srt_load(text).services[0].spec.args == ["--port", "1"]


def test_l1_options_beside_an_l1_manager_warn(srt_load: Load) -> None:
    text = (
        HEAD + "  - name: lmcache-server\n    options: {l1_size_gb: 4}\n"
        "    args: [--l1-manager, '{}']\n"
    )
    (w,) = warnings(srt_load, text)
    assert w.startswith("recipe.yaml:10:5: services[lmcache-server].options: l1_size_gb and")


# --------------------------------------------------------------------------- PYTHONHASHSEED

SEEDED = """\
schema: 2
name: v
engine: {type: vllm}
observability: {metrics: false}
frontend: {type: vllm, command: [f]}
roles:
  decode:
    command: [w]
    connector: lmcache-mp
    env: {PYTHONHASHSEED: '42'}
"""


def test_a_hash_seed_the_server_lacks_warns_at_the_workers_line(srt_load: Load) -> None:
    (w,) = warnings(srt_load, SEEDED)
    assert w == (
        "recipe.yaml:10:11: roles.decode.env.PYTHONHASHSEED: the workers hash with"
        " PYTHONHASHSEED=42 but the lmcache-server service does not (services do not inherit"
        " the workers' env), so their cache keys will not match: set PYTHONHASHSEED: '42' in"
        " the env of a services entry `{name: lmcache-server, env: {PYTHONHASHSEED: '42'}}`"
    )


def test_the_same_seed_on_the_server_is_quiet(srt_load: Load) -> None:
    text = SEEDED + "services:\n  - {name: lmcache-server, env: {PYTHONHASHSEED: '42'}}\n"
    assert warnings(srt_load, text) == []


def test_another_seed_on_a_declared_server_warns_naming_it(srt_load: Load) -> None:
    text = SEEDED + "services:\n  - {name: kv, type: lmcache-server, env: {PYTHONHASHSEED: '1'}}\n"
    (w,) = warnings(srt_load, text)
    assert "set PYTHONHASHSEED: '42' in the env of services[kv]" in w


def test_a_role_without_lmcache_is_not_concerned(srt_load: Load) -> None:
    assert warnings(srt_load, SEEDED.replace("lmcache-mp", "nixl")) == []


def test_sglang_workers_with_enable_lmcache_are_concerned_too(srt_load: Load) -> None:
    text = (
        SEEDED.replace("type: vllm}", "type: sglang}")
        .replace("type: vllm,", "type: sglang,")
        .replace("    connector: lmcache-mp\n", "    args: [--enable-lmcache]\n")
        + "services:\n  - {name: kv, type: lmcache-server}\n"
    )
    (w,) = warnings(srt_load, text)
    assert "roles.decode.env.PYTHONHASHSEED: the workers hash with PYTHONHASHSEED=42" in w
