"""The job around the services (roles, frontend, benchmark, schema) and the file itself
(YAML syntax, tabs, duplicate keys, documents that are not a mapping, odd bytes)."""

from __future__ import annotations

from pathlib import Path

import pytest
from srt_services.recipe.problems import RecipeError

#: A job with a vllm frontend, up to the ``roles:`` key (roles start on line 5).
ROLES_HEAD = "schema: 2\nname: t\nfrontend: {type: vllm, command: [f]}\nroles:\n"


def role(spec: str, gpus_per_node: int = 8) -> str:
    return (
        "schema: 2\nname: t\n"
        f"resources: {{gpus_per_node: {gpus_per_node}}}\n"
        "frontend: {type: vllm, command: [f]}\n"
        f"roles:\n  decode: {{command: [w], {spec}}}\n"
    )


# --------------------------------------------------------------------------- roles


def test_wide_worker_must_use_whole_nodes(srt_problem) -> None:
    p = srt_problem(role("gpus_per_worker: 12"))
    assert p.label == "roles.decode.gpus_per_worker"
    assert p.message == (
        "a worker wider than a node must use whole nodes: 12 is not a multiple of"
        " resources.gpus_per_node (8)"
    )
    assert (p.line, p.column) == (6, 26)


def test_wide_workers_need_exactly_their_nodes(srt_problem) -> None:
    p = srt_problem(role("workers: 2, gpus_per_worker: 16, nodes: 3"))
    assert p.label == "roles.decode.nodes"
    assert p.message == "2 worker(s) of 16 GPUs need exactly 4 node(s) of 8 GPUs; got 3"
    assert (p.line, p.column) == (6, 59)


def test_too_few_nodes_for_the_workers(srt_problem) -> None:
    p = srt_problem(role("workers: 5, gpus_per_worker: 4, nodes: 2"))
    assert p.label == "roles.decode.nodes"
    assert p.message == "5 worker(s) of 4 GPUs need at least 3 node(s) of 8 GPUs; got 2"


def test_more_nodes_than_workers(srt_problem) -> None:
    p = srt_problem(role("workers: 2, gpus_per_worker: 4, nodes: 3"))
    assert p.message == "3 nodes for 2 worker(s) would leave nodes idle"


def test_role_without_command(srt_problem) -> None:
    p = srt_problem(ROLES_HEAD + "  agg: {workers: 1}\n")
    assert p.label == "roles.agg.command"
    assert p.message == (
        "is required unless frontend.type vllm's engine builds it: that needs srt-direct,"
        " which is not installed (pip install srt-direct)"
    )
    assert (p.line, p.column) == (5, 3)


def test_role_with_an_empty_command(srt_problem) -> None:
    p = srt_problem(ROLES_HEAD + "  agg: {workers: 1, command: []}\n")
    assert p.label == "roles.agg.command"
    assert p.message == "if set, must not be empty"
    assert (p.line, p.column) == (5, 21)


def test_unknown_role(srt_problem) -> None:
    p = srt_problem(ROLES_HEAD + "  prefil: {command: [w]}\n")
    assert p.label == "roles.prefil"
    assert p.message == "must be one of prefill, decode, agg; got 'prefil' as a key"
    assert (p.line, p.column) == (5, 3)


@pytest.mark.parametrize(
    ("spec", "label", "message"),
    [
        ("workers: 0", "roles.decode.workers", "must be at least 1, got 0"),
        ("workers: 100001", "roles.decode.workers", "must be at most 100000, got 100001"),
        ("gpus_per_worker: 0", "roles.decode.gpus_per_worker", "must be at least 1, got 0"),
        ("port: 0", "roles.decode.port", "must be at least 1, got 0"),
    ],
)
def test_role_number_bounds(srt_problem, spec: str, label: str, message: str) -> None:
    p = srt_problem(role(spec))
    assert (p.label, p.message) == (label, message)


def test_gpus_per_node_bound(srt_problem) -> None:
    p = srt_problem("schema: 2\nname: t\nresources: {gpus_per_node: 4096}\n")
    assert p.label == "resources.gpus_per_node"
    assert p.message == "must be at most 1024, got 4096"


# --------------------------------------------------------------------------- frontend


def test_frontend_none_with_roles(srt_problem) -> None:
    p = srt_problem("schema: 2\nname: t\nfrontend: {type: none}\nroles:\n  agg: {command: [w]}\n")
    assert p.label == "frontend.type"
    assert p.message == (
        "engine workers need a frontend (frontend.type dynamo, sglang or vllm); `none` is only"
        " for jobs without roles"
    )
    assert (p.line, p.column) == (3, 12)


def test_absent_frontend_with_roles(srt_problem) -> None:
    p = srt_problem("schema: 2\nname: t\nroles:\n  agg: {command: [w]}\n")
    assert p.label == "roles"
    assert "engine workers need a frontend" in p.message
    assert (p.line, p.column) == (3, 1)


def test_frontend_without_command(srt_problem) -> None:
    p = srt_problem("schema: 2\nname: t\nfrontend: {type: sglang}\n")
    assert p.label == "frontend.command"
    assert p.message == (
        "is required unless frontend.type sglang's engine builds it: that needs srt-direct,"
        " which is not installed (pip install srt-direct)"
    )
    assert (p.line, p.column) == (3, 1)


def test_unknown_frontend_type(srt_problem) -> None:
    p = srt_problem("schema: 2\nname: t\nfrontend: {type: trtllm, command: [f]}\n")
    assert p.label == "frontend.type"
    assert p.message == (
        "'trtllm' is not a known frontend type (dynamo, none, sglang, trtllm-serve, vllm)"
    )


# the services a frontend type or a plane implies, without their plugin: test_rules_implied.py


# --------------------------------------------------------------------------- benchmark


@pytest.mark.parametrize("kind", ["sa-bench", "mooncake-router", "trace-replay"])
def test_a_first_party_benchmark_names_its_missing_plugin(srt_problem, kind) -> None:
    """srt-benchmarks is not registered here: the user is told which distribution to install,
    in the words tests/test_examples.py recognises as a missing plugin."""
    p = srt_problem(f"schema: 2\nname: t\nbenchmark:\n  type: {kind}\n")
    assert (p.label, p.line) == ("benchmark.type", 4)
    assert p.message.endswith(
        "it is provided by srt-benchmarks, which is not installed (pip install srt-benchmarks)"
    )


def test_benchmark_command_missing(srt_problem) -> None:
    p = srt_problem("schema: 2\nname: t\nbenchmark:\n  type: command\n")
    assert p.label == "benchmark.command"
    assert p.message == "is required for benchmark.type command"
    assert (p.line, p.column) == (3, 1)


def test_manual_benchmark_with_a_command(srt_problem) -> None:
    p = srt_problem("schema: 2\nname: t\nbenchmark:\n  command: [bench]\n")
    assert p.label == "benchmark.type"
    assert p.message == "is manual, so benchmark.command would never run; set type: command"


def test_benchmark_timeout_positive(srt_problem) -> None:
    p = srt_problem(
        "schema: 2\nname: t\nbenchmark: {type: command, command: [b], timeout_seconds: 0}\n"
    )
    assert p.label == "benchmark.timeout_seconds"
    assert p.message == "must be greater than 0, got 0"


# --------------------------------------------------------------------------- schema


def test_schema_missing_points_to_migrate(srt_problem) -> None:
    p = srt_problem("name: t\ninfra:\n  etcd_nats_dedicated_node: true\n")
    assert p.label == ""
    assert "no `schema: 2`" in p.message
    assert "srt migrate recipe.yaml" in p.message
    assert (p.line, p.column) == (1, 1)


@pytest.mark.parametrize(
    ("value", "shown"), [("1", "1"), ("3", "3"), ('"2"', "'2'"), ("null", "None")]
)
def test_schema_other_than_2(srt_problem, value: str, shown: str) -> None:
    p = srt_problem(f"name: t\nschema: {value}\n")
    assert p.label == "schema"
    assert p.message == f"only schema 2 is supported, got {shown}"
    assert (p.line, p.column) == (2, 1)


def test_unknown_top_level_key(srt_problem) -> None:
    p = srt_problem("schema: 2\nname: t\nfrontnd: {type: none}\n")
    assert p.label == "frontnd"
    assert p.message == "unknown key; did you mean 'frontend'?"
    assert (p.line, p.column) == (3, 1)


def test_unknown_key_without_a_close_name_lists_the_known_ones(srt_problem) -> None:
    p = srt_problem("schema: 2\nname: t\nresources: {cpus: 8}\n")
    assert p.label == "resources.cpus"
    assert p.message == "unknown key (known: colocate, gpus_per_node, layout, spread_workers)"


def test_unknown_service_key(srt_problem) -> None:
    p = srt_problem(
        "schema: 2\nname: t\nservices:\n  - name: a\n    command: [a]\n    readines: {port: 1}\n"
    )
    assert p.label == "services[a].readines"
    assert p.message == "unknown key; did you mean 'readiness'?"
    assert (p.line, p.column) == (6, 5)


@pytest.mark.parametrize(
    ("line", "label", "message"),
    [
        ("command: a", "services[a].command", "must be a list, got 'a'"),
        ("env: [A]", "services[a].env", "must be a mapping, got a list"),
        ("readiness: 9000", "services[a].readiness", "must be a mapping, got 9000"),
        ("critical: maybe", "services[a].critical", "must be true or false, got 'maybe'"),
        ("cpus_per_task: '8'", "services[a].cpus_per_task", "must be a whole number, got '8'"),
        ("nodes: 1.5", "services[a].nodes", "must be a whole number, got 1.5"),
        ("enabled: 1", "services[a].enabled", "must be true or false, got 1"),
        (
            "args: [--flag, true]",
            "services[a].args[1]",
            "must be text, got true; quote it if you mean the word",
        ),
        ("placement: workers", "services[a].placement", "must be a mapping, got 'workers'"),
    ],
)
def test_wrong_types(srt_problem, line: str, label: str, message: str) -> None:
    text = "schema: 2\nname: t\nservices:\n  - name: a\n    command: [a]\n    " + line + "\n"
    if line.startswith("command"):
        text = text.replace("    command: [a]\n", "")
    p = srt_problem(text)
    assert (p.label, p.message) == (label, message)


def test_services_must_be_a_list(srt_problem) -> None:
    p = srt_problem("schema: 2\nname: t\nservices: {a: {command: [a]}}\n")
    assert (p.label, p.message) == ("services", "must be a list, got a mapping")


def test_service_entry_must_be_a_mapping(srt_problems) -> None:
    found = srt_problems("schema: 2\nname: t\nservices:\n  - router\n  - null\n")
    assert [(p.label, p.message, p.line) for p in found] == [
        ("services[0]", "must be a mapping, got 'router'", 4),
        ("services[1]", "must be a mapping, got null", 5),
    ]


# --------------------------------------------------------------------------- several at once


def test_several_errors_are_reported_together(srt_load) -> None:
    text = """\
schema: 2
name: t
frontend: {type: none}
services:
  - name: a
    type: generic
  - name: a
    command: [b]
    placement: {node: heda}
  - name: c
    command: [c, "{nod}"]
    env: {SRT_X: "1", LD_PRELOAD: x.so}
    readiness: {htpp: {port: 1}}
    restart: {policy: always}
    critical: true
"""
    with pytest.raises(RecipeError) as info:
        srt_load(text)
    err = info.value
    assert len(err.errors) == 8
    lines = str(err).splitlines()
    assert lines[-1] == "recipe.yaml: 8 errors"
    # sorted by position, each with its own line:col
    positions = [(p.line or 0, p.column or 0) for p in err.errors]
    assert positions == sorted(positions)
    assert [p.label for p in err.errors] == [
        "services[a].command",
        "services[a].name",
        "services[a].placement.node",
        "services[c].command[1]",
        "services[c].env.SRT_X",
        "services[c].env.LD_PRELOAD",
        "services[c].readiness.htpp",
        "services[c].restart",
    ]


def test_several_shape_errors_are_reported_together(srt_problems) -> None:
    found = srt_problems(
        "schema: 2\nname: ../t\nresources: {gpus_per_node: 0}\nfrontnd: {}\n"
        "services:\n  - name: a\n    command: []\n    readiness: {port: 0}\n"
    )
    assert [p.line for p in found] == [2, 3, 4, 7, 8]


def test_checks_of_sound_entries_come_with_the_shape_errors_of_others(srt_load) -> None:
    text = """\
schema: 2
name: t
frontend: {type: none}
services:
  - name: a
    command: [a, "{nod}"]
  - name: b
    commnd: [b]
  - name: c
    command: [c]
    env: {SRT_X: "1"}
"""
    with pytest.raises(RecipeError) as info:
        srt_load(text)
    assert [p.render("recipe.yaml") for p in info.value.errors] == [
        "recipe.yaml:6:18: services[a].command[1]: unknown placeholder {nod} (did you mean"
        " {node}?); write {{nod}} for a literal {nod}",
        "recipe.yaml:8:5: services[b].commnd: unknown key; did you mean 'command'?",
        "recipe.yaml:11:11: services[c].env.SRT_X: names starting with SRT_ are reserved for srt",
    ]


def test_the_jobs_own_problems_come_with_the_shape_errors_of_entries(srt_problems) -> None:
    found = srt_problems(
        """
        schema: 2
        name: t
        frontend: {type: sglang}
        services:
          - name: x
            bogus: 1
        """
    )
    assert [p.label for p in found] == ["frontend.command", "services[x].bogus"]
    assert found[0].message.startswith("is required unless frontend.type sglang's engine")


def test_an_entry_left_out_for_its_shape_makes_no_false_problem_in_others(srt_problems) -> None:
    # the pool owner fails its shape; the rider's pool rule waits instead of calling it unknown
    found = srt_problems(
        """
        schema: 2
        name: t
        frontend: {type: none}
        services:
          - name: owner
            nodes: 1
            command: [p]
            bogus: 1
          - name: rider
            command: [r]
            placement: {pool: owner}
        """
    )
    assert [p.label for p in found] == ["services[owner].bogus"]
    assert found[0].message.startswith("unknown key")


def test_beside_shape_errors_a_duplicate_name_gives_the_document_position(srt_problems) -> None:
    found = srt_problems(
        """
        schema: 2
        name: t
        frontend: {type: none}
        services:
          - name: x
            bogus: 1
          - name: a
            command: [a]
          - name: a
            command: [a]
        """
    )
    assert [(p.label, p.line) for p in found] == [("services[x].bogus", 6), ("services[a].name", 9)]
    assert found[1].message == "duplicate service name 'a' (also services[1])"


def test_beside_a_shape_error_outside_the_services_the_entries_are_checked(srt_problems) -> None:
    """Every problem at once: the service entries' own rules run beside a bad count."""
    found = srt_problems(
        """
        schema: 2
        name: t
        frontend: {type: none}
        resources: {gpus_per_node: 0}
        services:
          - name: a
            command: [a, "{nod}"]
        """
    )
    assert [p.label for p in found] == ["resources.gpus_per_node", "services[a].command[1]"]


def test_a_structural_error_a_duplicate_name_and_an_unknown_type_in_one_pass(
    srt_problems,
) -> None:
    """Reported in two rounds before: the duplicate and the unknown type only once the
    role's unknown key was fixed."""
    found = srt_problems(
        """
        schema: 2
        name: two
        resources: {gpus_per_node: 8}
        roles:
          decode: {workers: 1, command: [python3, -m, x], bogus: 1}
        frontend: {type: vllm, command: [f]}
        services:
          - name: a
            command: [x]
          - name: a
            command: [y]
          - name: b
            type: nosuchkind
        """
    )
    assert [(p.label, p.line) for p in found] == [
        ("roles.decode.bogus", 5),
        ("services[a].name", 10),
        ("services[b].type", 13),
    ]
    assert found[1].message == "duplicate service name 'a' (also services[0])"
    assert "service type 'nosuchkind' is not known" in found[2].message


def test_the_job_wide_rules_wait_while_a_part_of_the_job_is_cut_out(srt_problems) -> None:
    """With `frontend.port` cut out for its shape, a rule about the job as a whole would
    judge another job: only the entries' own rules speak."""
    found = srt_problems(
        """
        schema: 2
        name: t
        resources: {gpus_per_node: 8}
        frontend: {type: sglang, port: "x"}
        services:
          - name: a
            command: [a]
        """
    )
    assert [p.label for p in found] == ["frontend.port"]


def test_a_whole_role_of_the_wrong_shape_holds_back_the_checks(srt_problems) -> None:
    """Nothing to cut without changing the job: a role that is not a mapping cannot be
    left out (services may be placed by it), so the later checks wait."""
    found = srt_problems(
        """
        schema: 2
        name: t
        resources: {gpus_per_node: 8}
        frontend: {type: vllm, command: [f]}
        roles:
          decode: 3
        services:
          - name: a
            command: [a, "{nod}"]
        """
    )
    assert [p.label for p in found] == ["roles.decode"]


# --------------------------------------------------------------------------- the file itself


def test_yaml_syntax_error_has_the_line(srt_problem) -> None:
    """The `[` of line 3 is never closed: that is where to look, not the end of the file
    where the parser gave up."""
    p = srt_problem("schema: 2\nname: t\nservices: [\n  {name: a, command: [a]}\n")
    assert p.label == ""
    assert p.message.startswith("YAML syntax error: ")
    assert (p.line, p.column) == (3, 11)
    assert "the '[' opened here is never closed (the parser gave up at 5:1)" in p.message


@pytest.mark.parametrize(
    ("text", "where", "opened"),
    [
        # the unclosed `{` of line 6, reported at 7:1 before
        (
            "schema: 2\nname: x\nresources: {gpus_per_node: 8}\nroles:\n"
            "  decode: {workers: 1, command: [a]}\nservices: [{name: a, command: [x]\n",
            (6, 12),
            "'{'",
        ),
        ("schema: 2\nname: t\nresources: {gpus_per_node: 8\n\n\n", (3, 12), "'{'"),
        ('schema: 2\nname: "t\nfrontend: {type: none}\n', (2, 7), "quote"),
    ],
)
def test_an_unclosed_bracket_is_reported_where_it_opens(
    srt_problem, text: str, where: tuple[int, int], opened: str
) -> None:
    p = srt_problem(text)
    assert (p.line, p.column) == where
    assert f"the {opened} opened here is never closed" in p.message


def test_a_bracket_closed_wrongly_on_its_own_line_is_reported_where_it_goes_wrong(
    srt_problem,
) -> None:
    p = srt_problem("schema: 2\nname: t\nresources: {gpus_per_node: [8}\n")
    assert (p.line, p.column) == (3, 30)  # the `}` where a `]` belongs
    assert "never closed" not in p.message


def test_unclosed_quote(srt_problem) -> None:
    p = srt_problem('schema: 2\nname: "t\nfrontend: {type: none}\n')
    assert p.message.startswith("YAML syntax error: found unexpected end of stream")


def test_bad_indentation(srt_problem) -> None:
    p = srt_problem("schema: 2\nname: t\nservices:\n  - name: a\n   command: [a]\n")
    assert p.message.startswith("YAML syntax error:")
    assert p.line == 5


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("schema: 2\nname: t\nservices:\n\t- name: a\n", 4),
        ("schema: 2\nname: t\nfrontend:\n  type: none\n\tcommand: [a]\n", 5),
        ("schema: 2\nname: t\nservices:\n  - name: a\n    command:\n\t- a\n", 6),
    ],
)
def test_tab_indentation(srt_problem, text: str, line: int) -> None:
    p = srt_problem(text)
    assert p.message.startswith("YAML syntax error:")
    assert p.message.endswith("YAML does not allow tabs for indentation, use spaces")
    assert (p.line, p.column) == (line, 1)


def test_tabs_inside_values_are_fine(srt_load) -> None:
    loaded = srt_load(
        'schema: 2\nname: t\nservices:\n  - name: a\n    command: [printf, "a\\tb"]\n'
    )
    assert loaded.services[0].spec.command == ["printf", "a\tb"]


def test_duplicate_keys(srt_problem) -> None:
    p = srt_problem(
        "schema: 2\nname: t\nservices:\n  - name: a\n    command: [a]\n    command: [b]\n"
    )
    assert p.message == "duplicate key 'command' in mapping"
    assert (p.line, p.column) == (6, 5)


def test_duplicate_top_level_keys(srt_problem) -> None:
    p = srt_problem("schema: 2\nname: t\nname: u\n")
    assert p.message == "duplicate key 'name' in mapping"
    assert (p.line, p.column) == (3, 1)


@pytest.mark.parametrize(
    ("text", "shown", "where"),
    [
        ("- a\n- b\n", "a list", (1, 1)),
        ("just words\n", "a str", (1, 1)),
        ("42\n", "a int", (1, 1)),
        ("", "empty", (None, None)),
        ("# only a comment\n", "empty", (None, None)),
        ("~\n", "empty", (1, 1)),
    ],
)
def test_document_that_is_not_a_mapping(
    srt_problem, text: str, shown: str, where: tuple[int | None, int | None]
) -> None:
    p = srt_problem(text)
    assert p.message == f"a recipe is a mapping of settings; this file is {shown}"
    assert (p.line, p.column) == where


def test_alias_cycle(srt_problem) -> None:
    p = srt_problem("schema: 2\nname: t\nx: &a [*a]\n")
    assert p.message == "an alias refers to a node that contains it (a cycle)"
    assert p.line == 3


def test_alias_bomb(srt_problem) -> None:
    text = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
    for i in range(1, 9):
        text += f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]\n"
    p = srt_problem(text)
    assert "alias expansion" in p.message


def test_merge_keys_work(srt_load) -> None:
    loaded = srt_load(
        "schema: 2\nname: t\nservices:\n  - &base {name: a, command: [a], critical: true}\n"
        "  - <<: *base\n    name: b\n"
    )
    assert [s.critical for s in loaded.services] == [True, True]
    assert loaded.services[1].spec.command == ["a"]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("!!int abc", "!!int value 'abc' is not a number"),
        ("!!int ²", "!!int value '²' is not a number"),
        ("!!float abc", "!!float value 'abc' is not a number"),
        ("!!bool maybe", "!!bool value 'maybe' is not true or false"),
        ("!!binary aGk=", "unsupported YAML tag tag:yaml.org,2002:binary"),
        ("!custom x", "unsupported YAML tag !custom"),
        (
            "!!python/object:os.system x",
            "unsupported YAML tag tag:yaml.org,2002:python/object:os.system",
        ),
    ],
)
def test_explicit_tags(srt_problem, value: str, message: str) -> None:
    p = srt_problem(f"schema: 2\nname: {value}\n")
    assert p.message == message
    assert (p.line, p.column) == (2, 7)


def test_yaml_11_numbers(srt_load) -> None:
    loaded = srt_load("schema: 2\nname: t\nresources: {gpus_per_node: 0x8}\n")
    assert loaded.recipe.resources.gpus_per_node == 8


def test_no_such_file(srt_load, tmp_path: Path) -> None:
    with pytest.raises(RecipeError) as info:
        srt_load(tmp_path / "missing.yaml")
    assert str(info.value) == f"{tmp_path / 'missing.yaml'}: no such file"


def test_a_directory(srt_load, tmp_path: Path) -> None:
    with pytest.raises(RecipeError) as info:
        srt_load(tmp_path)
    assert "is a directory" in str(info.value)


def test_not_utf8(srt_load, tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_bytes(b"schema: 2\nname: \xff\xfe\n")
    with pytest.raises(RecipeError) as info:
        srt_load(path)
    assert str(info.value) == f"{path}: is not UTF-8 text (byte 16)"


def test_control_characters(srt_problem) -> None:
    p = srt_problem("schema: 2\nname: a\x07b\n")
    assert p.message.startswith("cannot read recipe:")


# --------------------------------------------------------------------------- JSON recipes


def test_json_recipe_loads(srt_load, tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text('{"schema": 2, "name": "t", "services": [{"name": "a", "command": ["a"]}]}')
    loaded = srt_load(path)
    assert loaded.services[0].name == "a"


def test_json_recipe_errors_have_positions(srt_load, tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text(
        '{\n  "schema": 2,\n  "name": "t",\n  "services": [\n'
        '    {"name": "a", "comand": ["a"]}\n  ]\n}\n'
    )
    with pytest.raises(RecipeError) as info:
        srt_load(path)
    labels = [(p.label, p.line, p.column) for p in info.value.errors]
    assert ("services[a].comand", 5, 19) in labels


def test_broken_json_is_reported_by_the_yaml_parser(srt_load, tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text('{"schema": 2,\n "name": "t",,\n}')
    with pytest.raises(RecipeError) as info:
        srt_load(path)
    (p,) = info.value.errors
    assert p.message.startswith("YAML syntax error")
    assert p.line == 2


@pytest.mark.parametrize("where", ["command: [x, {n}]", "nodes: {n}"])
def test_a_number_too_long_for_python_is_a_located_error(srt_problem, where: str) -> None:
    # int() raises a bare ValueError past 4,300 digits; the parser must report it instead
    digits = "9" * 5000
    text = "schema: 2\nname: t\nfrontend: {type: none}\nservices:\n  - name: a\n    "
    p = srt_problem(text + where.format(n=digits) + "\n")
    assert p.message == "a number of 5000 digits is too long (at most 4300)"
    assert p.line == 6
