"""Placeholders: known names only, ``{{name}}`` for a literal, JSON left alone, one pass."""

from __future__ import annotations

import re
import textwrap

import pytest
from hypothesis import given
from hypothesis import strategies as st
from srt_services.recipe import placeholders as ph

HEAD = "schema: 2\nname: t\nfrontend: {type: none}\nservices:\n  - name: a\n"


def entry(body: str) -> str:
    """One service named ``a``; the body's first line is line 6."""
    return HEAD + textwrap.indent(textwrap.dedent(body).lstrip("\n"), "    ")


@pytest.mark.parametrize(
    ("body", "label", "where"),
    [
        ('command: [echo, "{nod}"]', "services[a].command[1]", (6, 21)),
        ('command: [a]\nargs: ["--host={nod}"]', "services[a].args[0]", (7, 12)),
        ('command: [a]\nenv: {X: "{nod}"}', "services[a].env.X", (7, 11)),
        ('command: [a]\npreamble: "echo {nod}"', "services[a].preamble", (7, 5)),
        ('command: [a]\ncontainer: "img-{nod}"', "services[a].container", (7, 5)),
        (
            'command: [a]\nsrun_options: {nodelist: "{nod}"}',
            "services[a].srun_options.nodelist",
            (7, 20),
        ),
        (
            'command: [a]\nsource: {git: x, rev: v1}\nbuild_command: [make, "{nod}"]',
            "services[a].build_command[1]",
            (8, 27),
        ),
        (
            'command: [a]\nreadiness: {file: {path: "{nod}/ready"}}',
            "services[a].readiness.file.path",
            (7, 24),
        ),
    ],
)
def test_unknown_placeholder_with_a_suggestion(
    srt_problem, body: str, label: str, where: tuple[int, int]
) -> None:
    p = srt_problem(entry(body))
    assert p.label == label
    assert (
        p.message
        == "unknown placeholder {nod} (did you mean {node}?); write {{nod}} for a literal {nod}"
    )
    assert (p.line, p.column) == where


def test_unknown_placeholder_without_a_close_name(srt_problem) -> None:
    p = srt_problem(entry('command: [echo, "{model_path}"]'))
    assert (
        p.message
        == "unknown placeholder {model_path}; write {{model_path}} for a literal {model_path}"
    )


def test_escape_renders_literally(srt_plan) -> None:
    planned = srt_plan(
        entry('command: [echo, "{{node}}", "{node}", "{{{{node}}}}"]\nenv: {X: "{{head_ip}}"}')
    )
    inst = planned.unit("a").instances[0]
    # only ``{{name}}`` is an escape; other doubled braces are plain text
    assert inst.argv == ["echo", "{node}", "node0", "{{{node}}}"]
    assert inst.env["X"] == "{head_ip}"


def test_json_braces_are_left_alone(srt_plan) -> None:
    body = """
    command: [a]
    env:
      CONFIG: '{"a": {"b": [1, 2]}, "node": "{node}", "x": {}}'
      BRACES: "{ node } {} {1} {-x}"
    """
    inst = srt_plan(entry(body)).unit("a").instances[0]
    assert inst.env["CONFIG"] == '{"a": {"b": [1, 2]}, "node": "node0", "x": {}}'
    assert inst.env["BRACES"] == "{ node } {} {1} {-x}"


def test_substitution_is_a_single_pass(srt_plan) -> None:
    # a value that itself looks like a placeholder is never substituted again
    planned = srt_plan(entry('command: [echo, "{node}"]'), nodelist=("{head_ip}",))
    assert planned.unit("a").instances[0].argv == ["echo", "{head_ip}"]


@pytest.mark.parametrize("name", sorted(ph.WORKER))
def test_worker_placeholders_need_per_worker(srt_problem, name: str) -> None:
    p = srt_problem(entry(f'command: [echo, "{{{name}}}"]'))
    assert p.label == "services[a].command[1]"
    assert p.message == (
        f"{{{name}}} is only known to instances attached to a worker"
        " (roles and placement.per: worker)"
    )


def test_worker_placeholders_render_per_worker(srt_plan) -> None:
    planned = srt_plan(
        """
        schema: 2
        name: t
        resources: {gpus_per_node: 8}
        frontend: {type: vllm, command: [f]}
        roles:
          decode: {workers: 2, gpus_per_worker: 4, port: 9100, command: [w]}
        services:
          - name: side
            command: [s, "{worker_role}", "{worker_index}", "{worker_node_rank}", "{worker_gpus}",
                      "{worker_gpu_count}", "{worker_port}", "{index}", "{role}"]
            placement: {node: decode, per: worker}
        """
    )
    argvs = [i.argv[1:] for i in planned.unit("side").instances]
    assert argvs == [
        ["decode", "0", "0", "0,1,2,3", "4", "9100", "0", "decode"],
        ["decode", "1", "0", "4,5,6,7", "4", "9101", "1", "decode"],
    ]
    envs = [i.env["CUDA_VISIBLE_DEVICES"] for i in planned.unit("side").instances]
    assert envs == ["0,1,2,3", "4,5,6,7"]


def test_every_common_placeholder_renders(srt_plan) -> None:
    names = sorted(ph.COMMON)
    command = ", ".join(f'"{{{n}}}"' for n in names)
    planned = srt_plan(entry(f"command: [x, {command}]"), nodes=2)
    argv = planned.unit("a").instances[0].argv[1:]
    assert len(argv) == len(names)
    values = dict(zip(names, argv, strict=True))
    assert values["node"] == "node0"
    assert values["node_ip"] == "<node0-ip>"
    assert values["head_node"] == "node0"
    assert values["gpus_per_node"] == "8"
    assert values["pool_node_count"] == "1"
    assert values["master_port"] == "8700"
    assert values["metadata_port"] == "8701"
    assert values["job_name"] == "t"
    assert values["work_dir"] == "<job_dir>/work/service_a"
    assert not any("{" in v for v in argv)


def test_pool_placeholders(srt_plan) -> None:
    planned = srt_plan(
        """
        schema: 2
        name: t
        services:
          - name: train
            nodes: 3
            command: [t, "{pool_node}", "{pool_ip}", "{pool_nodes}", "{pool_ips}",
                      "{pool_node_count}", "{index}"]
        """
    )
    argvs = [i.argv[1:] for i in planned.unit("train").instances]
    assert argvs[2] == [
        "node0",
        "<node0-ip>",
        "node0,node1,node2",
        "<node0-ip>,<node1-ip>,<node2-ip>",
        "3",
        "2",
    ]


def test_unit_render_and_names() -> None:
    # every name is unknown to an empty set: the names in order, escapes and non-names left out
    assert ph.unknown_in("a {node} {{head_ip}} {x-y} {1} {_ok}", frozenset()) == ["node", "_ok"]
    assert ph.render("{{a}}-{b}", {"b": "{a}"}) == "{a}-{a}"
    with pytest.raises(ph.UnknownPlaceholder):
        ph.render("{zzz}", {})
    assert ph.suggestion("head_nod", ph.COMMON) == " (did you mean {head_node}?)"
    assert ph.suggestion("qqqq", ph.COMMON) == ""


def _reference_render(text: str, values: dict[str, str]) -> str:
    """The rule as a regex substitution: what the compiled ``format_map`` form must equal."""

    def sub(m: re.Match[str]) -> str:
        return "{" + m.group(1) + "}" if m.group(1) is not None else values[m.group(2)]

    return ph.PLACEHOLDER_RE.sub(sub, text)


@given(
    st.lists(
        st.sampled_from(
            ["{", "}", "{{", "}}", "{a}", "{{a}}", "${a}", "{b}", "x", " ", "{1}", "{a.b}", ":"]
        ),
        max_size=12,
    ).map("".join)
)
def test_render_matches_the_regex_rule(text: str) -> None:
    # literal braces, format specs, attribute syntax and shell ${VAR} must all come out
    # exactly as the one-pass regex rule says, whatever str.format would make of them
    values = {"a": "{b}", "b": "B"}
    unknown = ph.unknown_in(text, frozenset(values))
    if unknown:  # the pieces can spell an unknown name, such as {x} or {ab}
        with pytest.raises(ph.UnknownPlaceholder) as raised:
            ph.render(text, values)
        assert raised.value.args[0] == unknown[0]
        return
    assert ph.render(text, values) == _reference_render(text, values)
