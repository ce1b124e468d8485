"""One failing recipe per rule of services.md "Validation": message, label and line:col.

The recipe head is four lines, so the first service entry always starts on line 5.
"""

from __future__ import annotations

import textwrap

import pytest
from srt_services.checking.rules.after import find_cycles
from srt_services.recipe.problems import LocatedProblem

HEAD = "schema: 2\nname: t\nfrontend: {type: none}\nservices:\n"


def services(body: str) -> str:
    """The recipe head plus a ``services:`` body (dedented): entries start on line 5."""
    return HEAD + textwrap.dedent(body).lstrip("\n")


def where(p: LocatedProblem) -> tuple[int | None, int | None]:
    return p.line, p.column


# --------------------------------------------------------------------------- names and types


def test_empty_name(srt_problem) -> None:
    p = srt_problem(
        services("""
        - name: ""
          command: [a]
        """)
    )
    assert p.label == "services[0].name"
    assert p.message == "must not be empty"
    assert where(p) == (5, 3)


def test_blank_name_is_not_a_name(srt_problem) -> None:
    p = srt_problem(
        services("""
        - name: "  "
          command: [a]
        """)
    )
    assert p.label == "services[0].name"
    assert "may only hold ASCII letters" in p.message
    assert where(p) == (5, 3)


def test_missing_name(srt_problem) -> None:
    p = srt_problem(
        services("""
        - command: [a]
        """)
    )
    assert p.label == "services[0].name"
    assert p.message == "is required"
    assert where(p) == (5, 3)


def test_duplicate_name_points_at_the_second_entry(srt_problem) -> None:
    p = srt_problem(
        services("""
        - name: router
          command: [a]
        - name: router
          command: [b]
        """)
    )
    assert p.label == "services[router].name"
    assert p.message == "duplicate service name 'router' (also services[0])"
    assert where(p) == (7, 3)


def test_unknown_type_lists_the_known_ones(srt_problem) -> None:
    p = srt_problem(
        services("""
        - name: a
          type: generc
          command: [a]
        """)
    )
    assert p.label == "services[a].type"
    assert "service type 'generc' is not known (known: generic)" in p.message
    assert "did you mean 'generic'?" in p.message
    assert where(p) == (6, 3)


def test_generic_without_command(srt_problem) -> None:
    p = srt_problem(
        services("""
        - name: sidecar
          readiness: {port: 9000}
        """)
    )
    assert p.label == "services[sidecar].command"
    assert p.message == "is required for type 'generic'"
    assert where(p) == (5, 3)  # the entry: there is no command key to point at


def test_empty_command_list(srt_problem) -> None:
    p = srt_problem(
        services("""
        - name: a
          command: []
        """)
    )
    assert p.label == "services[a].command"
    assert "must not be empty" in p.message
    assert where(p) == (6, 3)


@pytest.mark.parametrize(
    ("line", "label", "col"),
    [
        ('  command: [python3, ""]', "services[a].command[1]", 22),
        ('  command: [python3, "  "]', "services[a].command[1]", 22),
        ("  command: [a]\n  args: [--x, '']", "services[a].args[1]", 15),
    ],
)
def test_blank_argument(srt_problem, line: str, label: str, col: int) -> None:
    p = srt_problem(services("- name: a\n" + line + "\n"))
    assert p.label == label
    assert p.message == "must not be empty or blank"
    assert p.column == col


def test_build_command_empty_list(srt_problem) -> None:
    p = srt_problem(
        services("""
        - name: a
          command: [a]
          source: {git: https://example.invalid/r, rev: v1.2.0}
          build_command: []
        """)
    )
    assert p.label == "services[a].build_command"
    assert "must not be empty" in p.message
    assert "omit it" in p.message
    assert "default" not in p.message  # build_command has no default to fall back on
    assert where(p) == (8, 3)


def test_build_command_without_source(srt_problem) -> None:
    p = srt_problem(
        services("""
        - name: a
          command: [a]
          build_command: [make]
        """)
    )
    assert p.label == "services[a].build_command"
    assert p.message == "needs a source to build"
    assert where(p) == (7, 3)


def test_source_without_build_command_is_a_warning(srt_load) -> None:
    loaded = srt_load(
        services("""
        - name: a
          command: [a]
          source: {git: https://example.invalid/r, rev: v1.0}
        """)
    )
    # the other warning: the default metrics without srt-exporters (test_rules_implied.py)
    (w,) = [w for w in loaded.warnings if w.label.startswith("services")]
    assert w.warning
    assert w.label == "services[a].source"
    assert "nothing builds it" in w.message
    assert (w.line, w.column) == (7, 3)


# --------------------------------------------------------------------------- vocabularies


def test_placement_node_outside_vocabulary(srt_problem) -> None:
    p = srt_problem(
        services("""
        - name: a
          command: [a]
          placement: {node: heda}
        """)
    )
    assert p.label == "services[a].placement.node"
    assert p.message == (
        "must be one of agg, all, compute, decode, dedicated, head, infra, prefill, workers;"
        " got 'heda'"
    )
    assert where(p) == (7, 15)


def test_start_outside_vocabulary(srt_problem) -> None:
    p = srt_problem(
        services("""
        - name: a
          command: [a]
          start: with_workers
        """)
    )
    assert p.label == "services[a].start"
    assert p.message == "must be one of infra, before_workers, after_frontend; got 'with_workers'"
    assert where(p) == (7, 3)


def test_per_outside_vocabulary(srt_problem) -> None:
    p = srt_problem(
        services("""
        - name: a
          command: [a]
          placement: {node: workers, per: gpu}
        """)
    )
    assert p.label == "services[a].placement.per"
    assert p.message == "must be one of node, worker; got 'gpu'"
    assert where(p) == (7, 30)


def test_dedicated_on_a_kind_without_it(srt_problem) -> None:
    p = srt_problem(
        services("""
        - name: a
          command: [a]
          placement: {node: dedicated}
        """)
    )
    assert p.label == "services[a].placement.node"
    assert "dedicated is only for the infra kinds that support it, not type 'generic'" in p.message
    assert where(p) == (7, 15)


def test_external_on_a_kind_without_it(srt_problem) -> None:
    p = srt_problem(
        services("""
        - name: a
          external: http://etcd.example.invalid:2379
        """)
    )
    assert p.label == "services[a].external"
    assert p.message == "type 'generic' does not support external instances"
    assert where(p) == (6, 3)


def test_blank_external(srt_problem) -> None:
    p = srt_problem(
        services("""
        - name: a
          command: [a]
          external: "  "
        """)
    )
    assert p.label == "services[a].external"
    assert p.message == "must not be empty or blank"
    assert where(p) == (7, 3)


def test_unknown_options_key_names_the_kind(srt_problem) -> None:
    p = srt_problem(
        services("""
        - name: a
          command: [a]
          options: {max_payload_mb: 24}
        """)
    )
    assert p.label == "services[a].options.max_payload_mb"
    assert p.message.startswith("type 'generic' does not understand this option")
    assert where(p) == (7, 13)


# --------------------------------------------------------------------------- source


@pytest.mark.parametrize(
    ("rev", "why"),
    [
        ("main", "not the moving 'main'"),
        ("master", "not the moving 'master'"),
        ("HEAD", "not the moving 'HEAD'"),
        ("develop", "not the moving 'develop'"),
        ("refs/heads/feature-x", "not the branch 'refs/heads/feature-x'"),
        ("HEAD~1", "'HEAD~1' is a revision expression"),
        ("v1^", "'v1^' is a revision expression"),
        ("main@{yesterday}", "is a revision expression"),
        ("refs/pull/7/merge", "recomputed whenever the base branch moves"),
        ("refs/remotes/origin/x", "is not a tag or a PR head"),
        ("refs/tags/a..b", "is a revision expression or not a valid ref name"),
    ],
)
def test_moving_source_rev(srt_problem, rev: str, why: str) -> None:
    p = srt_problem(
        services(f"""
        - name: a
          command: [a]
          source:
            git: https://example.invalid/r
            rev: "{rev}"
          build_command: [make]
        """)
    )
    assert p.label == "services[a].source.rev"
    assert p.message.startswith("must be a full commit SHA, a tag, or refs/pull/<n>/head")
    assert why in p.message
    assert where(p) == (9, 5)


@pytest.mark.parametrize("rev", ["0123abc", "deadbeef0123", "a" * 39])
def test_abbreviated_shas_are_refused(srt_problem, rev: str) -> None:
    p = srt_problem(
        services(f"""
        - name: a
          command: [a]
          source: {{git: https://example.invalid/r, rev: "{rev}"}}
          build_command: [make]
        """)
    )
    assert p.label == "services[a].source.rev"
    assert p.message.startswith(f"{rev!r} looks like an abbreviated commit SHA; write all 40")


@pytest.mark.parametrize(
    "rev",
    [
        "v1.2.0",
        "release/2024.1",
        "beef",
        "20240101",
        "0123456789abcdef0123456789abcdef01234567",
        "refs/pull/14000/head",
        "refs/tags/v1",
    ],
)
def test_immutable_source_revs_are_accepted(srt_load, rev: str) -> None:
    loaded = srt_load(
        services(f"""
        - name: a
          command: [a]
          source: {{git: https://example.invalid/r, rev: "{rev}"}}
          build_command: [make]
        """)
    )
    assert loaded.services[0].spec.source is not None


def test_a_full_sha_is_taken_in_any_case(srt_load) -> None:
    sha = "0123456789ABCDEF0123456789ABCDEF01234567"
    loaded = srt_load(
        services(f"""
        - name: a
          command: [a]
          source: {{git: https://example.invalid/r, rev: {sha}}}
          build_command: [make]
        """)
    )
    source = loaded.services[0].spec.source
    assert source is not None and source.checkout == sha.lower()


def test_build_scope_needs_a_source(srt_problem) -> None:
    p = srt_problem(
        services("""
        - name: a
          command: [a]
          build_scope: shared
        """)
    )
    assert p.label == "services[a].build_scope"
    assert p.message == "needs a source to build"


def test_source_path_must_stay_inside_the_checkout(srt_problem) -> None:
    p = srt_problem(
        services("""
        - name: a
          command: [a]
          source: {git: https://example.invalid/r, rev: v1, path: ../../etc}
          build_command: [make]
        """)
    )
    assert p.label == "services[a].source.path"
    assert p.message == "must be a relative path inside the checkout"


def test_source_sha_must_look_like_a_commit(srt_problem) -> None:
    p = srt_problem(
        services("""
        - name: a
          command: [a]
          source: {git: https://example.invalid/r, rev: v1, sha: not-a-sha}
          build_command: [make]
        """)
    )
    assert p.label == "services[a].source.sha"
    assert "must be a full commit SHA" in p.message


# --------------------------------------------------------------------------- pools


def test_unknown_pool(srt_problem) -> None:
    p = srt_problem(
        services("""
        - name: train
          command: [a]
          nodes: 2
        - name: envsrv
          command: [b]
          placement: {pool: trian}
        """)
    )
    assert p.label == "services[envsrv].placement.pool"
    assert p.message == "'trian' names no service that declares nodes (pools: train)"
    assert where(p) == (10, 15)


def test_pool_without_any_owner(srt_problem) -> None:
    p = srt_problem(
        services("""
        - name: envsrv
          command: [b]
          placement: {pool: train}
        """)
    )
    assert p.message == "'train' names no service that declares nodes (pools: none)"


@pytest.mark.parametrize("use", ["placement: {pool: train}", "after: [train]"])
def test_a_service_of_an_unknown_type_gets_only_its_own_error(srt_problem, use: str) -> None:
    # the entry is not settled (its type is unknown), but it still declares its pool and
    # can be waited for: what uses it adds no second, misleading error
    p = srt_problem(
        services(f"""
        - name: train
          type: nosuchkind
          nodes: 2
        - name: envsrv
          command: [b]
          {use}
        """)
    )
    assert p.label == "services[train].type"


def test_node_and_pool_together(srt_problem) -> None:
    p = srt_problem(
        services("""
        - name: train
          command: [a]
          nodes: 2
        - name: envsrv
          command: [b]
          placement: {node: head, pool: train}
        """)
    )
    assert p.label == "services[envsrv].placement"
    assert p.message == "give either node or pool, not both"
    assert where(p) == (10, 3)


def test_pool_owner_with_a_non_workers_placement(srt_problem) -> None:
    p = srt_problem(
        services("""
        - name: train
          command: [a]
          nodes: 2
          placement: {node: head}
        """)
    )
    assert p.label == "services[train].placement.node"
    assert "must be workers (or omitted); got 'head'" in p.message
    assert where(p) == (8, 15)


def test_pool_owner_riding_on_a_pool(srt_problem) -> None:
    p = srt_problem(
        services("""
        - name: train
          command: [a]
          nodes: 2
          placement: {pool: train}
        """)
    )
    assert p.label == "services[train].placement.pool"
    assert "owns its own pool; drop placement.pool" in p.message


@pytest.mark.parametrize(
    ("value", "message"),
    [(0, "must be at least 1, got 0"), (100_001, "must be at most 100000, got 100001")],
)
def test_pool_size_bounds(srt_problem, value: int, message: str) -> None:
    p = srt_problem(
        services(f"""
        - name: train
          command: [a]
          nodes: {value}
        """)
    )
    assert p.label == "services[train].nodes"
    assert p.message == message


# --------------------------------------------------------------------------- per: worker


def test_per_worker_needs_a_worker_placement(srt_problem) -> None:
    p = srt_problem(
        services("""
        - name: a
          command: [a]
          placement: {node: head, per: worker}
        """)
    )
    assert p.label == "services[a].placement.per"
    assert p.message == (
        "per: worker needs a placement that selects workers (prefill, decode, agg or workers);"
        " got 'head'"
    )
    assert where(p) == (7, 27)


def test_per_worker_on_a_pool(srt_problem) -> None:
    p = srt_problem(
        services("""
        - name: train
          command: [a]
          nodes: 1
        - name: a
          command: [a]
          placement: {pool: train, per: worker}
        """)
    )
    assert p.label == "services[a].placement.per"
    assert p.message == "per: worker attaches to engine workers, not to a pool"


ROLE_HEAD = (
    "schema: 2\nname: t\nfrontend: {type: vllm, command: [f]}\n"
    "roles:\n  decode: {workers: 2, gpus_per_worker: 4, command: [w]}\nservices:\n"
)


@pytest.mark.parametrize(
    ("probe", "shown"),
    [("port: 9000", "tcp"), ("http: {port: 9000}", "http"), ("tcp: {port: 9000}", "tcp")],
)
def test_per_worker_readiness_must_watch_the_instance(srt_problem, probe: str, shown: str) -> None:
    p = srt_problem(
        ROLE_HEAD
        + textwrap.dedent(f"""\
        - name: side
          command: [a]
          placement: {{node: decode, per: worker}}
          readiness: {{{probe}}}
        """)
    )
    assert p.label == "services[side].readiness"
    assert p.message == (
        "per-worker instances share their node's ports, so readiness must be a probe of the"
        f" instance itself (log or file), not {shown}"
    )
    assert where(p) == (10, 3)


@pytest.mark.parametrize("probe", ["log: {pattern: ready}", "file: {path: ready.flag}"])
def test_per_worker_log_and_file_probes_are_accepted(srt_load, probe: str) -> None:
    loaded = srt_load(
        ROLE_HEAD
        + textwrap.dedent(f"""\
        - name: side
          command: [a]
          placement: {{node: decode, per: worker}}
          readiness: {{{probe}}}
        """)
    )
    assert loaded.services[0].per == "worker"


# --------------------------------------------------------------------------- metrics


def test_several_metrics_endpoints_need_names(srt_problem) -> None:
    p = srt_problem(
        services("""
        - name: a
          command: [a]
          metrics:
            - {port: 9000}
            - {port: 9001}
        """)
    )
    assert p.label == "services[a].metrics"
    assert p.message == "declares 2 endpoints; give each a distinct name"
    assert where(p) == (7, 3)


def test_several_metrics_endpoints_need_distinct_names(srt_problem) -> None:
    p = srt_problem(
        services("""
        - name: a
          command: [a]
          metrics:
            - {port: 9000, name: m}
            - {port: 9001, name: m}
        """)
    )
    assert p.message == "declares 2 endpoints; give each a distinct name"


def test_metrics_path_must_be_absolute(srt_problem) -> None:
    p = srt_problem(
        services("""
        - name: a
          command: [a]
          metrics: {port: 9000, path: metrics}
        """)
    )
    # one mapping stands for a one-item list: the label and mark are the mapping's own
    assert p.label == "services[a].metrics.path"
    assert p.message == "must start with '/'"
    assert where(p) == (7, 25)


@pytest.mark.parametrize(
    ("port", "message"),
    [(0, "must be at least 1, got 0"), (65536, "must be at most 65535, got 65536")],
)
def test_metrics_port_range(srt_problem, port: int, message: str) -> None:
    p = srt_problem(
        services(f"""
        - name: a
          command: [a]
          metrics:
            - {{port: {port}}}
        """)
    )
    assert p.label == "services[a].metrics[0].port"
    assert p.message == message
    assert where(p) == (8, 8)


def test_metrics_nodes_vocabulary(srt_problem) -> None:
    p = srt_problem(
        services("""
        - name: a
          command: [a]
          metrics: {port: 9000, nodes: last}
        """)
    )
    assert p.label == "services[a].metrics.nodes"
    assert p.message == "must be one of all, first; got 'last'"


# --------------------------------------------------------------------------- lifecycle


def test_terminal_with_a_benchmark_command(srt_problem) -> None:
    p = srt_problem(
        """
        schema: 2
        name: t
        frontend: {type: none}
        benchmark: {type: command, command: [bench]}
        services:
          - name: train
            command: [a]
            terminal: true
        """
    )
    assert p.label == "services[train].terminal"
    assert "cannot also run benchmark.type: command" in p.message
    assert where(p) == (8, 5)


def test_terminal_external_with_a_kind_that_supports_external(srt_plugins, srt_problem) -> None:
    from typing import ClassVar

    import srt_services
    from srt_services.contracts.kind import ServiceKind

    class Remote(ServiceKind):
        name: ClassVar[str] = "remote"
        supports_external: ClassVar[bool] = True

    class Plugin:
        @srt_services.hookimpl
        def srt_register_service_kinds(self) -> list[type[ServiceKind]]:
            return [Remote]

    srt_plugins.register(Plugin(), "remote-kind")
    p = srt_problem(
        services("""
        - name: a
          type: remote
          external: http://x.invalid:1
          terminal: true
        """)
    )
    assert p.label == "services[a].terminal"
    assert p.message == "needs a process to wait for; an external service launches nothing"
    assert where(p) == (8, 3)


@pytest.mark.parametrize("policy", ["always", "on-failure"])
def test_restart_policy_on_a_critical_service(srt_problem, policy: str) -> None:
    p = srt_problem(
        services(f"""
        - name: router
          command: [a]
          critical: true
          restart: {{policy: {policy}}}
        """)
    )
    assert p.label == "services[router].restart"
    assert "critical and terminal services are never restarted" in p.message
    assert where(p) == (8, 3)


def test_restart_policy_no_on_a_critical_service_is_accepted(srt_load) -> None:
    srt_load(
        services("""
        - name: router
          command: [a]
          critical: true
          restart: {policy: "no"}
        """)
    )


def test_restart_backoff_order(srt_problem) -> None:
    p = srt_problem(
        services("""
        - name: a
          command: [a]
          restart: {backoff_initial_seconds: 10, backoff_max_seconds: 5}
        """)
    )
    assert p.label == "services[a].restart"
    assert p.message == "backoff_max_seconds (5) must not be below backoff_initial_seconds (10)"


@pytest.mark.parametrize(
    ("key", "value"),
    [("cpus_per_task", 0), ("build_timeout_seconds", 0), ("build_timeout_seconds", -5)],
)
def test_positive_numbers(srt_problem, key: str, value: int) -> None:
    p = srt_problem(services(f"- name: a\n  command: [a]\n  {key}: {value}\n"))
    assert p.label == f"services[a].{key}"
    assert p.message.startswith(("must be at least 1", "must be greater than 0"))
    assert where(p) == (7, 3)


def test_srun_option_names(srt_problem) -> None:
    p = srt_problem(
        services("""
        - name: a
          command: [a]
          srun_options: {--exclusive: ""}
        """)
    )
    assert p.label == "services[a].srun_options.--exclusive"
    assert "no leading dashes" in p.message
    assert where(p) == (7, 18)


# --------------------------------------------------------------------------- repeated shapes
#
# The checker memoises a placement combination that passed and a probe config that
# validated, so a generated recipe with thousands of look-alike services pays a lookup for
# each. The memo must change nothing a user can see: every failing service still gets its
# own error, and shared answers still carry each service's own names.


def test_the_same_bad_placement_is_reported_for_each_service(srt_problems) -> None:
    found = srt_problems(
        services("""
        - {name: a, command: [a], placement: {node: hed}}
        - {name: b, command: [b], placement: {node: hed}}
        """)
    )
    assert [p.label for p in found] == [
        "services[a].placement.node",
        "services[b].placement.node",
    ]
    assert all("got 'hed'" in p.message for p in found)


def test_the_same_bad_probe_config_is_reported_for_each_service(srt_problems) -> None:
    found = srt_problems(
        services("""
        - {name: a, command: [a], readiness: {http: {port: 8080, pth: /h}}}
        - {name: b, command: [b], readiness: {http: {port: 8080, pth: /h}}}
        """)
    )
    assert [p.label for p in found] == [
        "services[a].readiness.http.pth",
        "services[b].readiness.http.pth",
    ]


def test_a_shared_probe_config_still_plans_each_instance_on_its_node(srt_plan) -> None:
    p = srt_plan(
        services("""
        - {name: own-a, nodes: 1, command: [a]}
        - {name: own-b, nodes: 1, command: [b]}
        - {name: a, command: [a], placement: {pool: own-a}, readiness: {http: {port: 81, path: /h}}}
        - {name: b, command: [b], placement: {pool: own-b}, readiness: {http: {port: 81, path: /h}}}
        """)
    )
    a, b = p.unit("a").instances[0], p.unit("b").instances[0]
    assert a.node != b.node
    assert a.readiness is not None and b.readiness is not None
    assert a.readiness.config["host"] == a.node_ip
    assert b.readiness.config["host"] == b.node_ip
    assert a.readiness.config["url"] != b.readiness.config["url"]


def test_a_remembered_placement_keeps_each_service_s_own_pool(srt_plan) -> None:
    p = srt_plan(
        services("""
        - {name: own-a, nodes: 1, command: [a]}
        - {name: own-b, nodes: 1, command: [b]}
        - {name: r1, command: [r], placement: {pool: own-a}}
        - {name: r2, command: [r], placement: {pool: own-b}}
        """)
    )
    assert p.unit("own-a").pool == "own-a"
    assert p.unit("own-b").pool == "own-b"
    assert p.unit("r1").pool == "own-a"
    assert p.unit("r2").pool == "own-b"
    assert p.unit("r1").nodes != p.unit("r2").nodes


def test_equal_but_differently_typed_settings_are_not_shared(srt_problems) -> None:
    # 8080 == 8080.0 == hash-equal: a memo keyed on values alone would let the float through
    found = srt_problems(
        services("""
        - {name: a, command: [a], readiness: {tcp: {port: 8080}}}
        - {name: b, command: [b], readiness: {tcp: {port: 8080.0}}}
        - {name: c, command: [c], readiness: {tcp: {port: 1}}}
        - {name: d, command: [d], readiness: {tcp: {port: true}}}
        """)
    )
    assert [p.label for p in found] == [
        "services[b].readiness.tcp.port",
        "services[d].readiness.tcp.port",
    ]


# --------------------------------------------------------------------------- after
# Each rule stands for a job that would otherwise hang in a phase at run time.


def test_unknown_name_suggests_a_close_one(srt_problem) -> None:
    p = srt_problem(
        services("""
        - name: store
          command: [a]
        - name: router
          command: [b]
          after: [stor]
        """)
    )
    assert p.label == "services[router].after[0]"
    assert p.message == "'stor' names no service of this job; did you mean 'store'?"
    assert where(p) == (9, 11)


def test_waiting_for_itself(srt_problem) -> None:
    p = srt_problem(
        services("""
        - name: router
          command: [b]
          after: [router]
        """)
    )
    assert p.label == "services[router].after[0]"
    assert p.message == "a service cannot wait for itself"


def test_listed_twice(srt_problem) -> None:
    p = srt_problem(
        services("""
        - name: store
          command: [a]
        - name: router
          command: [b]
          after: [store, store]
        """)
    )
    assert p.label == "services[router].after[1]"
    assert p.message == "lists 'store' twice"
    assert where(p) == (9, 18)


def test_a_service_of_a_later_phase(srt_problem) -> None:
    p = srt_problem(
        services("""
        - name: exporter
          command: [a]
        - name: store
          command: [b]
          start: before_workers
          after: [exporter]
        """)
    )
    assert p.label == "services[store].after[0]"
    assert p.message == (
        "'exporter' starts in phase after_frontend, after this service's phase before_workers,"
        " so it cannot be ready first: start this service in after_frontend or 'exporter'"
        " earlier"
    )
    assert where(p) == (10, 11)


def test_services_of_earlier_phases_are_accepted(srt_load) -> None:
    loaded = srt_load(
        services("""
        - name: store
          command: [a]
          start: infra
        - name: router
          command: [b]
          after: [store]
        """)
    )
    assert [s.spec.after for s in loaded.services] == [None, ["store"]]


def test_a_switched_off_service(srt_problem) -> None:
    p = srt_problem(
        services("""
        - name: store
          enabled: false
          command: [a]
        - name: router
          command: [b]
          after: [store]
        """)
    )
    assert p.message == "'store' is switched off (enabled: false)"


def test_the_jobs_own_processes_are_not_services(srt_problem) -> None:
    p = srt_problem(
        """
        schema: 2
        name: t
        frontend: {type: sglang, command: [router]}
        services:
          - name: probe
            command: [b]
            after: [frontend]
        """
    )
    assert p.label == "services[probe].after[0]"
    assert p.message.startswith("'frontend' is one of the job's own processes, not a service")
    assert "start: after_frontend" in p.message


def test_a_cycle_is_named_once_from_its_first_member(srt_problem) -> None:
    p = srt_problem(
        services("""
        - name: a
          command: [a]
          after: [c]
        - name: b
          command: [b]
          after: [a]
        - name: c
          command: [c]
          after: [b]
        """)
    )
    assert p.label == "services[a].after"
    assert p.message == (
        "these services wait for each other, so none of them would start: a -> c -> b -> a"
    )
    assert where(p) == (7, 3)


def test_the_chain_cannot_close_a_cycle(srt_load) -> None:
    """A service without `after` waits only for its predecessor, never for one that left the
    chain, so naming a service declared later is no cycle."""
    loaded = srt_load(
        services("""
        - name: early
          command: [a]
          after: [late]
        - name: late
          command: [b]
        """)
    )
    assert [s.name for s in loaded.services] == ["early", "late"]


def test_every_problem_at_once(srt_problems) -> None:
    found = srt_problems(
        services("""
        - name: a
          command: [a]
          after: [b, nope, a]
        - name: b
          command: [b]
          after: [a]
        """)
    )
    cycle = "these services wait for each other, so none of them would start: a -> b -> a"
    assert sorted((p.label, p.message) for p in found) == [
        ("services[a].after", cycle),
        ("services[a].after[1]", "'nope' names no service of this job"),
        ("services[a].after[2]", "a service cannot wait for itself"),
    ]


def test_find_cycles_reports_disjoint_cycles_and_survives_long_chains() -> None:
    edges = {"a": ["b"], "b": ["a"], "c": ["d"], "d": ["e"], "e": ["c", "a"]}
    assert find_cycles(edges) == [["a", "b"], ["c", "d", "e"]]
    # a chain of 20,000 waits: no recursion limit, no cycle
    chain = {f"s{i}": [f"s{i + 1}"] for i in range(20_000)}
    assert find_cycles(chain) == []
    chain["s20000"] = ["s0"]
    (cycle,) = find_cycles(chain)
    assert len(cycle) == 20_001 and cycle[0] == "s0"
