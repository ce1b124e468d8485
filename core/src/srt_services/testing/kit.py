"""Helpers behind the plugin-author fixtures, usable without pytest.

Everything here builds on the same code paths ``srt`` itself runs (the recipe loader, the
planner, the plugin facade), so a plugin that passes its tests with these helpers behaves the
same under ``srt dry-run`` and ``srt run``. Nothing here scans entry points: a test sees
exactly the plugins it registers, never whatever else happens to be installed.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import textwrap
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from srt_services import builtin
from srt_services.hookspecs import hookimpl
from srt_services.plugins.manager import HookCall, PluginSet

if TYPE_CHECKING:
    from srt_services.app.compose import Setup
    from srt_services.app.run import Events, RunResult
    from srt_services.checking.load import LoadedRecipe
    from srt_services.contracts.allocation import Allocation
    from srt_services.contracts.context import InstanceContext, Layout
    from srt_services.contracts.engine import Engine
    from srt_services.contracts.kind import ServiceKind
    from srt_services.contracts.placement import Placement
    from srt_services.contracts.plan import Plan
    from srt_services.contracts.probe import Probe
    from srt_services.recipe.models import ServiceSpec
    from srt_services.recipe.problems import LocatedProblem
    from srt_services.site_config import SiteConfig


# --------------------------------------------------------------------------- plugin sets


def isolated_plugins(plugin: object | None = None, name: str | None = None) -> PluginSet:
    """Built-ins only, autoload off: what every kit fixture starts from. With ``plugin`` (a
    hookimpl module or object), that plugin registered too, under ``name``: the set a
    plugin's own tests plan in, whatever else is installed in the venv."""
    plugins = PluginSet(autoload=False, builtins=builtin)
    if plugin is not None:
        plugins.register(plugin, name)
    return plugins


@dataclass(frozen=True, slots=True)
class KitSettings:
    """How the kit's fixtures treat the tests of one directory.

    A plugin's ``conftest.py`` overrides the ``srt_kit_settings`` fixture once (its plugin,
    how its tests' recipes are read and planned) instead of re-writing ``srt_plugins``,
    ``srt_load`` and ``srt_plan`` with its own defaults.
    """

    #: Registered in every test's ``srt_plugins`` (the plugin under test).
    plugin: object | None = None
    #: The name ``plugin`` is registered under (what problems and ``owner()`` show).
    plugin_name: str | None = None
    #: The recipe's file name in rendered problems (``recipe.yaml:7:17: ...``).
    source: str = "kit.yaml"
    #: ``srt_plan`` on loopback nodes (127.0.0.x), as ``srt run`` plans, instead of the
    #: symbolic ``<node0-ip>`` of a ``srt dry-run`` without an allocation.
    local: bool = False
    #: What ``{job_dir}`` renders to in plans.
    job_dir: str = "<job_dir>"
    #: Top-level keys added to every recipe that does not set them (see :func:`recipe_text`),
    #: e.g. ``{"observability": {"metrics": False}}`` where srt-exporters is not installed.
    fill: Mapping[str, Any] = field(default_factory=dict)
    #: The site config plans are made under (``None``: an empty one, whatever
    #: ``SRT_SITE_CONFIG`` says).
    site: SiteConfig | None = None


class FreePorts:
    """``free_ports()``: a port the kernel just handed out, never the same one twice.

    A test that needs several ports (a client and a peer port) gets distinct ones, and none
    is a fixed default another session on the machine may be using (etcd's 2379,
    Mooncake's 8700). The port is probed on the wildcard address, so it is free on every
    local address: the 127.0.0.x virtual nodes, and servers that bind 0.0.0.0 whatever
    they are told (Mooncake's metadata server and stores).
    """

    def __init__(self) -> None:
        self.given: set[int] = set()

    def __call__(self) -> int:
        while True:
            with socket.socket() as s:
                s.bind(("0.0.0.0", 0))  # noqa: S104 - bound to probe, closed at once
                port = int(s.getsockname()[1])
            if port not in self.given:
                self.given.add(port)
                return port


class ClassesPlugin:
    """A stand-in plugin registering the given classes, for testing a class on its own
    before (or without) writing the plugin module."""

    def __init__(
        self,
        kinds: Iterable[type[ServiceKind]] = (),
        probes: Iterable[type[Probe]] = (),
        placements: Iterable[type[Placement]] = (),
        engines: Iterable[type[Engine]] = (),
    ) -> None:
        self.kinds = list(kinds)
        self.probes = list(probes)
        self.placements = list(placements)
        self.engines = list(engines)

    @hookimpl
    def srt_register_service_kinds(self) -> list[type[ServiceKind]]:
        return list(self.kinds)

    @hookimpl
    def srt_register_probes(self) -> list[type[Probe]]:
        return list(self.probes)

    @hookimpl
    def srt_register_placements(self) -> list[type[Placement]]:
        return list(self.placements)

    @hookimpl
    def srt_register_engines(self) -> list[type[Engine]]:
        return list(self.engines)


@contextlib.contextmanager
def registered(plugins: PluginSet, obj: object, name: str | None = None) -> Iterator[str]:
    """Register ``obj`` for the ``with`` block only; unregistered even when the block fails,
    so one test's plugin never leaks into the next (the datasette/llm "undo" pattern)."""
    plugin_name = plugins.register(obj, name)
    try:
        yield plugin_name
    finally:
        with contextlib.suppress(ValueError, KeyError):
            plugins.unregister(plugin_name)


# --------------------------------------------------------------------------- hook recorder


class HookRecorder:
    """Every hook call the facade makes, in order (pytester's ``HookRecorder`` for srt)."""

    def __init__(self, plugins: PluginSet) -> None:
        self.calls: list[HookCall] = []
        self._undo = plugins.add_monitor(self.calls.append)

    def close(self) -> None:
        self._undo()

    def clear(self) -> None:
        self.calls.clear()

    def hooks(self) -> list[str]:
        return [c.hook for c in self.calls]

    def calls_of(self, hook: str, plugin: str | None = None) -> list[HookCall]:
        """Calls of ``hook`` (in which ``plugin``'s implementation ran, when given)."""
        return [c for c in self.calls if c.hook == hook and (plugin is None or plugin in c.plugins)]

    def assert_called(self, hook: str, times: int | None = None, plugin: str | None = None) -> None:
        found = self.calls_of(hook, plugin)
        who = f" of {plugin}" if plugin else ""
        if times is None:
            assert found, f"{hook}{who} was never called; calls: {self.hooks()}"
        else:
            assert len(found) == times, (
                f"{hook}{who} was called {len(found)} time(s), expected {times}"
            )

    def assert_not_called(self, hook: str, plugin: str | None = None) -> None:
        self.assert_called(hook, 0, plugin)


# --------------------------------------------------------------------------- jobs and plans


def fake_allocation(nodes: int = 2, kind: str = "symbolic", job_id: str = "test") -> Allocation:
    """``nodes`` named ``node0..``: symbolic addresses (``<node0-ip>``) or, with
    ``kind="local"``, the loopback addresses ``srt run`` would use."""
    from srt_services.contracts.allocation import AllocationRequest

    return AllocationRequest(kind=kind, count=nodes, job_id=job_id).build(nodes)


def fake_layout(nodes: int = 2, gpus_per_node: int = 8, workers_per_node: int = 1) -> Layout:
    """A job of ``nodes`` nodes of ``agg`` workers (head and infra on the first node)."""
    from srt_services.plan import layout as layout_mod

    shape = layout_mod.RoleShape(
        role="agg",
        nodes=nodes,
        workers=nodes * workers_per_node,
        gpus_per_worker=max(1, gpus_per_node // workers_per_node),
        span=1,
        per_node=workers_per_node,
    )
    needs = layout_mod.NodeNeeds(
        dedicated_infra=False, dedicated_client=False, roles=(shape,), pools=()
    )
    allocation = fake_allocation(nodes)
    return layout_mod.carve(list(allocation.nodes), needs, gpus_per_node, {"agg": 8100})


def instance_context(
    service: str = "svc",
    layout: Layout | None = None,
    node: int = 0,
    job_dir: str = "<job_dir>",
    discovery_env: Mapping[str, str] | None = None,
) -> InstanceContext:
    """The context a kind's methods get for one instance on ``node`` of ``layout``, with the
    same placeholder values the planner would render (so ``command()`` can be unit-tested);
    ``discovery_env`` is what the job's discovery services would announce."""
    from srt_services.contracts.context import InstanceContext, JobPaths

    lay = layout or fake_layout()
    target = lay.nodes[node]
    paths = JobPaths(job_dir=job_dir, job_id="test")
    step = f"service_{service}"
    values = {
        "node": target.name,
        "node_ip": target.ip,
        "node_id": str(node),
        "index": "0",
        "role": "head",
        "head_node": lay.head.name,
        "head_ip": lay.head.ip,
        "infra_node": lay.infra.name,
        "infra_ip": lay.infra.ip,
        "master_port": "8700",
        "metadata_port": "8701",
        "gpus_per_node": str(lay.gpus_per_node),
        "pool_node": target.name,
        "pool_ip": target.ip,
        "pool_nodes": target.name,
        "pool_ips": target.ip,
        "pool_node_count": "1",
        "job_dir": job_dir,
        "log_dir": paths.log_dir,
        "work_dir": paths.work_dir(step),
        "local_dir": paths.local_dir(step),
        "local_job_dir": paths.local_job_dir,
        "job_id": "test",
        "job_name": "test",
        "frontend_port": "",
    }
    return InstanceContext(
        service=service,
        step=step,
        node=target,
        index=0,
        role="head",
        nodes=(target,),
        layout=lay,
        paths=paths,
        values=values,
        discovery_env=dict(discovery_env or {}),
    )


def service_spec(entry: Mapping[str, Any]) -> ServiceSpec:
    """A recipe ``services`` entry as the model the kind's methods receive."""
    from srt_services.recipe.models import ServiceSpec

    return ServiceSpec.model_validate(dict(entry))


def recipe_text(recipe: Mapping[str, Any] | str, fill: Mapping[str, Any] | None = None) -> str:
    """The YAML text of a test's recipe.

    Text is dedented and a leading newline dropped (a recipe written inline is indented
    with the test's code and starts on the line after the quotes; lines and columns in
    problems count from the dedented text); a mapping gets ``schema`` and ``name`` filled
    in. Each ``fill`` key the recipe does not set at the top level is appended after its
    last line, so every line number a test checks stays where it is.
    """
    import yaml

    if not isinstance(recipe, str):
        doc = {"schema": 2, "name": "kit", **dict(recipe)}
        for key, value in (fill or {}).items():
            doc.setdefault(key, value)
        return str(yaml.safe_dump(doc, sort_keys=False))
    text = textwrap.dedent(recipe).lstrip("\n")
    for key, value in (fill or {}).items():
        if not re.search(rf"^{re.escape(key)}\s*:", text, re.MULTILINE):
            line = yaml.safe_dump({key: value}, default_flow_style=None, sort_keys=False)
            text = text.rstrip("\n") + "\n" + str(line)
    return text


def load(
    plugins: PluginSet,
    recipe: Mapping[str, Any] | str | os.PathLike[str],
    source: str = "kit.yaml",
    fill: Mapping[str, Any] | None = None,
) -> LoadedRecipe:
    """Load a recipe through the composition root (:func:`srt_services.app.compose.load`),
    exactly as ``srt validate`` does: text or a mapping (see :func:`recipe_text`) shown as
    ``source``, or a recipe file given as a path (``pathlib.Path``), read from disk. Raises
    :class:`srt_services.recipe.problems.RecipeError`."""
    from srt_services.app import compose

    where = setup(plugins)
    if isinstance(recipe, os.PathLike):
        return compose.load(where, os.fspath(recipe))
    return compose.load(where, source, text=recipe_text(recipe, fill))


def load_variants(
    plugins: PluginSet,
    recipe: str | os.PathLike[str],
    variant: str | None = None,
    text: str | None = None,
    site: SiteConfig | None = None,
) -> list[LoadedRecipe]:
    """Every job of a recipe file, as ``srt dry-run`` loads them: one for a schema-2 recipe,
    the selected (default: the format's default) variants of another tool's recipe, which a
    recipe-format plugin translates. ``text`` is read instead of the file, shown under
    ``recipe``; ``site`` gives the ``[formats.<name>]`` tables (default: an empty site).
    Raises :class:`srt_services.recipe.problems.RecipeError`."""
    from srt_services.checking.load import load_variants as load_all

    where = setup(plugins, site)
    return load_all(os.fspath(recipe), plugins, text, variant, format_settings=where.site.formats)


def plan_loaded(
    plugins: PluginSet,
    loaded: LoadedRecipe,
    nodes: int | None = None,
    *,
    job_dir: str = "<job_dir>",
    site: SiteConfig | None = None,
) -> Plan:
    """Plan one loaded job (a variant of :func:`load_variants`) on ``nodes`` symbolic nodes
    (default: as many as it needs), as ``srt dry-run`` plans it."""
    from srt_services.app import compose
    from srt_services.contracts.allocation import AllocationRequest

    request = AllocationRequest(kind="symbolic", count=nodes, job_id="dry-run")
    return compose.plan(setup(plugins, site), loaded, request, job_dir=job_dir).plan


def source_of(recipe: Mapping[str, Any] | str | os.PathLike[str], source: str) -> str:
    """The name problems of ``recipe`` are shown under: a file's path, else ``source``."""
    return os.fspath(recipe) if isinstance(recipe, os.PathLike) else source


def recipe_errors(
    plugins: PluginSet,
    recipe: Mapping[str, Any] | str | os.PathLike[str],
    source: str = "kit.yaml",
    fill: Mapping[str, Any] | None = None,
) -> list[str]:
    """The rendered error lines of an invalid recipe; ``[]`` when it loads."""
    from srt_services.recipe.problems import RecipeError

    try:
        load(plugins, recipe, source, fill)
    except RecipeError as exc:
        return [p.render(exc.source) for p in exc.errors]
    return []


def plan(
    plugins: PluginSet,
    recipe: Mapping[str, Any] | str | os.PathLike[str],
    nodes: int | None = None,
    local: bool = False,
    *,
    job_dir: str = "<job_dir>",
    source: str = "kit.yaml",
    fill: Mapping[str, Any] | None = None,
    nodelist: Sequence[str] | None = None,
    allocation: Allocation | None = None,
    job_id: str | None = None,
    site: SiteConfig | None = None,
    runs_here: bool = False,
    local_network: str | None = "shared",
) -> Plan:
    """Load and plan through the application layer, like ``srt dry-run [--nodes N]
    [--local]``: the job directory rendered as ``job_dir``, on ``nodes`` symbolic (or
    loopback, ``local``) nodes, the nodes of ``nodelist``, or a ready ``allocation``.

    The site config is explicit (``site``; default an empty one): the caller's
    ``SRT_SITE_CONFIG`` never changes a test's plan. ``runs_here`` plans as ``srt run``
    does on this machine (the local launcher's warnings, each kind asked whether it can
    run here), with the virtual nodes networked as ``local_network`` says (``srt run
    --local-network``; ``None``: the site's ``[local] network``): ``shared`` by default,
    so that a test's plan does not depend on whether the machine running it may make
    network namespaces."""
    from srt_services.app import compose
    from srt_services.contracts.allocation import AllocationRequest

    loaded = load(plugins, recipe, source, fill)
    where = setup(plugins, site)
    kind = "local" if local or runs_here else "symbolic"
    nodes_given: Allocation | AllocationRequest = allocation or AllocationRequest(
        kind=kind,
        count=nodes,
        nodelist=tuple(nodelist) if nodelist is not None else None,
        job_id=job_id or ("local" if kind == "local" else "dry-run"),
        job_dir=job_dir if runs_here else None,
    )
    launcher = plugins.launcher_class("local") if runs_here else None
    planned = compose.plan(
        where,
        loaded,
        nodes_given,
        job_dir=job_dir,
        launcher=launcher,
        runs_here=runs_here,
        local_network=local_network,
    )
    return planned.plan


def _empty_site() -> SiteConfig:
    from srt_services.site_config import SiteConfig

    return SiteConfig()


def site_config(path: str | os.PathLike[str]) -> SiteConfig:
    """The site config in the file at ``path``, read as ``srt`` reads ``SRT_SITE_CONFIG``
    (a bad file raises :class:`srt_services.site_config.SiteConfigError`). Pass it as
    ``site`` to :func:`plan` (or the ``srt_plan`` fixture) or :func:`setup`: the kit never
    reads the caller's ``SRT_SITE_CONFIG``."""
    from srt_services import site_config as site_mod

    return site_mod.load(os.fspath(path))


def setup(plugins: PluginSet | None = None, site: SiteConfig | None = None) -> Setup:
    """What the composition root settles for a command (:class:`srt_services.app.compose.Setup`),
    made explicit for a test: ``plugins`` (default: :func:`isolated_plugins`) under ``site``
    (default: an empty site config, whatever ``SRT_SITE_CONFIG`` says). Pass it to the
    application layer's use cases (``srt_services.app``) to run them as ``srt`` would."""
    from srt_services.app import compose

    return compose.Setup(
        site=site if site is not None else _empty_site(),
        plugins=plugins if plugins is not None else isolated_plugins(),
    )


def supervise(
    plugins: PluginSet,
    plan: Plan,
    job_dir: str,
    *,
    launcher: str = "local",
    grace: float | None = None,
    on_event: Events | None = None,
    site: SiteConfig | None = None,
) -> RunResult:
    """Run a final plan (one :func:`plan` made with ``runs_here=True`` and ``job_dir``) to its
    end in this process, as ``srt run`` does after planning: the job directory is created,
    then :func:`srt_services.app.run.supervise` builds the launcher and the probe table and
    hands them to the orchestrator. ``on_event`` sees every job event; the result's ``code``
    is what ``srt run`` would exit with."""
    from srt_services.app import run
    from srt_services.jobdir.layout import JobDir

    job = JobDir(os.path.abspath(job_dir))
    job.create()
    where = setup(plugins, site)
    launcher_cls = plugins.launcher_class(launcher)
    return run.supervise(where, plan, job, launcher_cls, grace, on_event or _ignore_event)


def _ignore_event(event: Mapping[str, Any]) -> None:
    """No progress display: the events are in the job's ``events.jsonl`` all the same."""


@dataclass(frozen=True, slots=True)
class CliResult:
    """What one ``srt`` command run by :func:`run_cli` ended with."""

    code: int
    stdout: str
    stderr: str


def run_cli(
    args: Sequence[str],
    plugins: PluginSet | None = None,
    *,
    stdin: str | None = None,
    env: Mapping[str, str] | None = None,
) -> CliResult:
    """``srt ARGS`` in this process, through the real entry point: its exit code and what it
    printed, as a user would see them (a recipe error exits 2 with its located problems).

    The command sees ``plugins`` as the process-wide plugin set (default: built-ins only),
    so a plugin's tests run ``srt validate``, ``srt dry-run`` or ``srt migrate`` with their
    plugin and nothing else installed; the site config is empty unless ``env`` names one
    (``SRT_SITE_CONFIG``). ``env`` is set for the command only; the previous plugin set is
    put back afterwards."""
    import io
    import sys

    from srt_services.cli.main import main
    from srt_services.plugins import manager

    chosen = plugins if plugins is not None else isolated_plugins()
    full_env = {"SRT_SITE_CONFIG": os.devnull, "COLUMNS": "200", "NO_COLOR": "1", **(env or {})}
    saved_env = {name: os.environ.get(name) for name in full_env}
    previous = manager._default
    # text streams over bytes, as a terminal's are: commands write JSON to sys.stdout.buffer
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
    code: object = 0
    manager.reset_default(lambda: chosen)
    os.environ.update(full_env)
    saved_stdin = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO((stdin or "").encode()), encoding="utf-8")
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(list(args))
            except SystemExit as exc:
                code = exc.code
    finally:
        sys.stdin = saved_stdin
        for name, value in saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        manager.reset_default((lambda: previous) if previous is not None else None)
    stdout = _written(out)
    stderr = _written(err)
    status = code if isinstance(code, int) else (0 if code is None else 1)
    return CliResult(status, stdout, stderr)


def _written(stream: Any) -> str:
    """What a command wrote to a text stream over bytes (text and bytes alike)."""
    stream.flush()
    raw = stream.buffer.getvalue()
    return str(raw.decode("utf-8", "replace"))


def problems(
    plugins: PluginSet,
    recipe: Mapping[str, Any] | str | os.PathLike[str],
    nodes: int | None = None,
    *,
    source: str = "kit.yaml",
    fill: Mapping[str, Any] | None = None,
) -> list[LocatedProblem]:
    """Every error of a recipe that must be refused by ``srt validate`` (at load or at
    plan time), each located; fails the calling test when the recipe is accepted, or
    when a problem is not in the rendered error text the user would see."""
    from srt_services.recipe.problems import RecipeError

    try:
        plan(plugins, recipe, nodes, source=source, fill=fill)
    except RecipeError as exc:
        errors, rendered = exc.errors, str(exc)
    else:
        raise AssertionError("the recipe was accepted")
    assert errors, "a RecipeError must carry at least one error"
    assert "Traceback" not in rendered
    shown = source_of(recipe, source)
    for p in errors:
        assert p.render(shown) in rendered
    return list(errors)


@dataclass(slots=True)
class Sample:
    """One sample recipe of a contract suite: the whole recipe and the entry under test."""

    recipe: dict[str, Any]
    entry: dict[str, Any]
    label: str = ""

    @property
    def service(self) -> str:
        return str(self.entry["name"])

    def with_entry(self, **changes: Any) -> Sample:
        """The same recipe with the entry under test changed (``None`` removes a key)."""
        import copy

        entry = copy.deepcopy(self.entry)
        for key, value in changes.items():
            if value is None:
                entry.pop(key, None)
            else:
                entry[key] = value
        recipe = copy.deepcopy(self.recipe)
        recipe["services"] = [
            entry if s.get("name") == self.service else s for s in recipe["services"]
        ]
        return Sample(recipe=recipe, entry=entry, label=self.label)


def samples_for(
    kind_name: str,
    entries: Sequence[Mapping[str, Any]],
    base: Mapping[str, Any],
) -> list[Sample]:
    """One recipe per entry: ``base`` plus the entry (``type`` and ``name`` filled in)."""
    import copy

    out = []
    for i, raw in enumerate(entries):
        entry = dict(copy.deepcopy(dict(raw)))
        entry.setdefault("type", kind_name)
        entry.setdefault("name", f"{kind_name}-sample{i}" if i else f"{kind_name}-sample")
        recipe = copy.deepcopy(dict(base))
        recipe.setdefault("schema", 2)
        recipe.setdefault("name", "contract")
        recipe["services"] = [*recipe.get("services", []), entry]
        out.append(Sample(recipe=recipe, entry=entry, label=f"entries[{i}]"))
    return out
