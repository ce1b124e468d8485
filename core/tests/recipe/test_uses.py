"""``uses``: a unit names a service it uses; refused before anything starts when the name,
the service's kind, the numbers or the start order cannot work, and turned into the kind's
wrapper around the unit's argv when the plan is made.

The kind under test is a small one of this file (core knows no kind that accepts uses), so
these are core's rules alone; srt-oarbank's tests run the real thing.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

import pytest
import srt_services
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from srt_services.contracts.kind import ServiceKind
from srt_services.contracts.plan import PlannedInstance
from srt_services.recipe.models import Recipe, ServiceSpec, UseSpec
from srt_services.recipe.problems import Problem, RecipeError
from srt_services.testing import kit


class BrokerKind(ServiceKind):
    """Accepts uses of its pools ``a`` and ``b``; wraps with ``admit <socket> <pools> --``."""

    name: ClassVar[str] = "broker"
    accepts_uses: ClassVar[bool] = True
    default_start: ClassVar[str] = "infra"

    def command(self, spec: ServiceSpec, options: Any, ctx: Any) -> list[str]:
        return ["broker", "--socket", "{work_dir}/sock"]

    def validate_use(
        self, spec: ServiceSpec, options: Any, use: UseSpec, recipe: Recipe
    ) -> Iterable[Problem]:
        if use.pool is not None and use.pool not in ("a", "b"):
            yield Problem(("pool",), f"no pool {use.pool!r} (pools: a, b)")

    def use_command(
        self,
        spec: ServiceSpec,
        options: Any,
        uses: Sequence[UseSpec],
        provider: PlannedInstance,
        user: PlannedInstance,
    ) -> list[str]:
        pools = [f"{u.pool}={u.tokens or 1}" for u in uses if u.pool]
        socket = provider.argv[provider.argv.index("--socket") + 1]
        return ["admit", spec.name, socket, *pools, "--", *user.argv]


class Broker:
    @srt_services.hookimpl
    def srt_register_service_kinds(self) -> list[type[ServiceKind]]:
        return [BrokerKind]


@pytest.fixture
def plugins() -> Any:
    p = kit.isolated_plugins()
    p.register(Broker(), "broker")
    return p


HEAD = "schema: 2\nname: t\nfrontend: {type: none}\n"


def recipe(body: str) -> str:
    return HEAD + textwrap.dedent(body).lstrip("\n")


def one_problem(plugins: Any, text: str, nodes: int | None = None) -> Any:
    found = kit.problems(plugins, text, nodes)
    assert len(found) == 1, [p.render(text) for p in found]
    return found[0]


def test_a_unit_is_wrapped_by_each_service_it_uses_first_entry_outermost(plugins: Any) -> None:
    plan = kit.plan(
        plugins,
        recipe("""
        services:
          - {name: b1, type: broker}
          - {name: b2, type: broker}
          - name: user
            command: [run, me]
            uses: [{service: b1, pool: a}, {service: b2, pool: b, tokens: 3}, {service: b1}]
        benchmark:
          type: command
          command: [bench]
          uses: [{service: b2}]
        """),
    )
    units = {u.name: u for u in plan.units}
    (user,) = units["user"].instances
    assert user.argv == [
        "admit", "b1", "<job_dir>/work/service_b1/sock", "a=1", "--",
        "admit", "b2", "<job_dir>/work/service_b2/sock", "b=3", "--",
        "run", "me",
    ]  # fmt: skip
    (bench,) = units["benchmark"].instances
    assert bench.argv == ["admit", "b2", "<job_dir>/work/service_b2/sock", "--", "bench"]
    # a unit without uses keeps its argv
    assert units["b1"].instances[0].argv == ["broker", "--socket", "<job_dir>/work/service_b1/sock"]


@pytest.mark.parametrize(
    ("uses", "label", "message", "column"),
    [
        ("[{service: nope}]", "uses[0].service", "no service 'nope' runs in this job", 40),
        ("[{service: plain}]", "uses[0].service", "a 'generic' service, whose kind takes no", 40),
        ("[{service: user}]", "uses[0].service", "a service cannot use itself", 40),
        ("[{service: b, pool: c}]", "uses[0].pool", "no pool 'c' (pools: a, b)", 52),
        ("[{service: b, pool: a, tokens: 0}]", "uses[0].tokens", "must be at least 1", 61),
        ("[{service: b, tokens: 2}]", "uses[0]", "tokens without a pool", 39),
        ("[{service: b, colour: red}]", "uses[0].colour", "unknown key", 52),
        ("[{service: b, mem_gb: -1}]", "uses[0].mem_gb", "must be at least 0", 52),
    ],
)
def test_a_bad_entry_is_refused_with_its_field_and_line(
    plugins: Any, uses: str, label: str, message: str, column: int
) -> None:
    text = recipe(f"""
        services:
          - {{name: b, type: broker}}
          - {{name: user, command: [x], uses: {uses}}}
          - {{name: plain, command: [y]}}
        """)
    p = one_problem(plugins, text)
    assert p.label == f"services[user].{label}", p
    assert message in p.message, p.message
    assert (p.line, p.column) == (6, column), p


def test_the_used_service_must_be_up_before_its_user(plugins: Any) -> None:
    text = recipe("""
        services:
          - {name: user, start: infra, command: [x], uses: [{service: b}]}
          - {name: b, type: broker, start: before_workers}
          - {name: late, command: [y], uses: [{service: c}]}
          - {name: c, type: broker, start: after_frontend}
          - {name: waits, command: [z], after: [], start: after_frontend, uses: [{service: c}]}
        roles:
          agg: {command: [w], uses: [{service: c}]}
        """)
    found = {p.label: p for p in kit.problems(plugins, text, 2)}
    assert "starts in before_workers, after this service's phase" in (
        found["services[user].uses[0].service"].message
    )
    assert (
        "may not be ready when this service starts"
        in found["services[late].uses[0].service"].message
    )
    assert "add 'c' to its `after`" in found["services[waits].uses[0].service"].message
    assert "starts in after_frontend, after the workers start" in (
        found["roles.agg.uses[0].service"].message
    )
    assert found["roles.agg.uses[0].service"].line == 11


def test_a_service_declared_before_in_its_phase_or_named_in_after_is_up_first(
    plugins: Any,
) -> None:
    kit.plan(
        plugins,
        recipe("""
        services:
          - {name: b, type: broker, start: after_frontend}
          - {name: chained, command: [x], start: after_frontend, uses: [{service: b}]}
          - {name: named, command: [y], start: after_frontend, after: [b], uses: [{service: b}]}
        """),
    )


def test_a_user_on_a_node_without_the_service_is_refused_at_plan_time(plugins: Any) -> None:
    text = recipe("""
        services:
          - {name: b, type: broker, placement: {node: head}}
          - {name: owner, command: [o], nodes: 2}
          - {name: user, command: [x], placement: {pool: owner}, uses: [{service: b}]}
        """)
    p = one_problem(plugins, text, 3)
    assert p.label == "services[user].uses[0].service"
    assert "runs on node1, where services[b] has no instance (it runs on node0)" in p.message
    assert p.line == 7


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.dictionaries(
            st.sampled_from(["service", "capability", "pool", "tokens", "mem_gb", "x"]),
            st.one_of(
                st.integers(-3, 5),
                st.floats(allow_nan=True, allow_infinity=True),
                st.text(max_size=6),
                st.sampled_from(["b", "user", "a", "nope"]),
                st.none(),
                st.booleans(),
            ),
            max_size=5,
        ),
        max_size=4,
    )
)
def test_any_uses_value_is_planned_or_refused_with_located_problems(uses: list[Any]) -> None:
    plugins = kit.isolated_plugins()
    plugins.register(Broker(), "broker")
    data = {
        "schema": 2,
        "name": "t",
        "frontend": {"type": "none"},
        "services": [
            {"name": "b", "type": "broker"},
            {"name": "user", "command": ["x"], "uses": uses},
        ],
    }
    try:
        plan = kit.plan(plugins, data)
    except RecipeError as exc:
        errors = exc.errors
    else:
        errors = []
    if errors:
        assert all(p.line is not None for p in errors), [p.label for p in errors]
        return
    (user,) = next(u for u in plan.units if u.name == "user").instances
    assert user.argv[-1] == "x"
    assert (user.argv[0] == "admit") == bool(uses)


def test_the_frontend_s_uses_wrap_its_replicas_not_the_balancer(plugins: Any) -> None:
    plan = kit.plan(
        plugins,
        recipe("""
        resources: {gpus_per_node: 1}
        services:
          - {name: b, type: broker, placement: {node: all}}
        """).replace(
            "frontend: {type: none}\n",
            "frontend:\n  type: sglang\n  replicas: 2\n  command: [serve]\n"
            "  uses: [{service: b, pool: a}]\n"
            "roles:\n  agg: {workers: 3, command: [w]}\n",
        ),
        3,
    )
    units = {u.name: u for u in plan.units}
    replicas = units["frontend"].instances
    assert len(replicas) == 2
    assert all(i.argv[0] == "admit" and i.argv[-1] == "serve" for i in replicas)
    # each replica asks the broker instance on its own node
    socket_on = {i.node: f"{i.work_dir}/sock" for i in units["b"].instances}
    assert [i.argv[2] for i in replicas] == [socket_on[i.node] for i in replicas]
    assert len({i.argv[2] for i in replicas}) == 2
    (balancer,) = units["frontend-balancer"].instances
    assert balancer.argv[0] == "nginx"
