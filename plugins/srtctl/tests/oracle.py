"""srt's plan of an srtctl recipe against what srtctl itself built (tests/data/expected).

The recipe is loaded as ``srt`` loads it (the ``srtctl`` format, core's checks) and planned
by the installed engines (srt-dynamo, srt-direct); nothing of this plugin builds a process.
Per variant the comparison covers: the node count, the workers of each role with their node
and GPUs, each worker's module and flags (a multiset: srtctl's flag order carries no
meaning), the environment the recipe asks for, the frontends (count, nodes, module, flags),
the balancer and its node, the benchmark type and client node, and etcd's node. The
benchmarks srt-benchmarks runs with srtctl's trace scripts' arguments (mooncake-router,
trace-replay) are planned by srt-benchmarks itself and their settings compared with the
arguments of srtctl's ``bench.sh``; the others are stood in for (their command is `true`).

Where srt deliberately differs (docs/differences.md), the expected side is normalised by a
NAMED rule, and a rule is applied only to the values it names; a difference no rule
explains is a failure.
"""

from __future__ import annotations

import ast
import json
import os
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import srt_benchmarks.plugin
import srt_direct.plugin
import srt_dynamo.plugin
import srt_etcd.plugin
import srt_nats.plugin
import srt_srtctl.plugin
from pydantic import BaseModel, ConfigDict
from srt_services.extend import BenchmarkKind, EngineProcess, Plan, hookimpl
from srt_services.testing import kit

HERE = Path(__file__).parent

#: srt's documented differences from srtctl (docs/differences.md, section "srtctl"), by the
#: name the comparison uses. Each is applied only where its description says.
DIFFERENCES = {
    "duplicate-flags": "a flag srtctl passes twice (its own and the recipe's copy) is passed once",
    "log-dir-in-container": "--dump-config-to names a file under the log directory the process"
    " sees, per worker",
    "node-address": "processes advertise their node's address (--http-host, <nodeK-ip>"
    " instead of a hostname)",
    "mocker-model-name": "the mocker is told the served model name (--model-name)",
    "json-config-values": "nested mappings in *_config are passed as JSON, not Python reprs",
    "single-frontend-direct": "where srtctl runs ONE frontend on a worker node behind nginx on"
    " the head, srt runs it on the head's public port without nginx",
}

#: Variants srt cannot plan yet, by recipe and selector, with the reason (never a blanket
#: skip: a variant that starts planning fails the test until it is removed from here).
UNSUPPORTED: dict[tuple[str, str | None], str] = {}

#: srtctl's benchmark types as srt names them.
BENCHMARK_OF = {"custom": "command"}
#: Benchmark kinds planned by the real srt-benchmarks, with the settings compared.
REAL_BENCHMARKS = ("mooncake-router", "trace-replay")
#: srtctl benchmark types: those srt-benchmarks has are planned by it (their options
#: validated as a user's are); the others are accepted as given (the unit runs `true`).
STAND_IN_BENCHMARKS = (
    "sa-bench",
    "gsm8k",
    "gpqa",
    "router",
    "mmlu",
    "longbenchv2",
    "sglang-bench",
    "lm-eval",
)
#: srtctl's ``bench.sh`` arguments after the URL (design note section 10), by benchmark
#: type: the option each carries, and how srtctl spells it.
BENCH_ARGS = {
    "mooncake-router": (
        "model",
        "mooncake_workload",
        "ttft_threshold_ms",
        "itl_threshold_ms",
        "tokenizer",
    ),
    "trace-replay": (
        "model",
        "trace_file",
        "concurrencies",
        "ttft_threshold_ms",
        "itl_threshold_ms",
        "tokenizer",
    ),
}


class _AnyOptions(BaseModel):
    model_config = ConfigDict(extra="allow")


def _stand_in(name: str) -> type[BenchmarkKind]:
    class StandIn(BenchmarkKind):
        Options = _AnyOptions

        def process(self, recipe: Any, options: Any, ctx: Any) -> EngineProcess:
            return EngineProcess(argv=["true"])

    StandIn.name = name
    StandIn.__name__ = f"StandIn_{name}"
    return StandIn


class StandInBenchmarks:
    @hookimpl
    def srt_register_benchmarks(self) -> list[type[BenchmarkKind]]:
        # every kind srt-benchmarks has is the real one (its options checked as a user's
        # would be: srtctl's ``concurrencies: ['2048']`` was refused while a stand-in hid it)
        real = srt_benchmarks.plugin.srt_register_benchmarks()
        have = {k.name for k in real}
        return [*real, *(_stand_in(n) for n in STAND_IN_BENCHMARKS if n not in have)]


def plugins(with_benchmarks: bool = True) -> Any:
    """Core, the engines and the format (and the benchmarks: srt-benchmarks' trace kinds,
    stand-ins for the rest)."""
    found = kit.isolated_plugins()
    for module, name in (
        (srt_dynamo.plugin, "srt-dynamo"),
        (srt_direct.plugin, "srt-direct"),
        (srt_srtctl.plugin, "srt-srtctl"),
        (srt_etcd.plugin, "srt-etcd"),
        (srt_nats.plugin, "srt-nats"),
    ):
        found.register(module, name)
    if with_benchmarks:
        found.register(StandInBenchmarks(), "stand-in-benchmarks")
    return found


def data_dir() -> Path:
    env = os.environ.get("SRTCTL_DATA")
    return Path(env) if env else HERE / "data"


def recipes() -> list[str]:
    root = data_dir() / "recipes"
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.yaml"))


def load_expected(recipe: str) -> dict[str, Any]:
    path = data_dir() / "expected" / recipe
    data: dict[str, Any] = json.loads(path.with_suffix(".json").read_text())
    return data


@dataclass
class Built:
    selector: str | None
    plan: Plan | None
    benchmark: str | None = None
    error: str | None = None


def build_variants(recipe: str, found: Any = None) -> Iterator[Built]:
    """Every default variant of the recipe, loaded and planned as `srt dry-run` does."""
    found = found or plugins()
    try:
        every = kit.load_variants(found, data_dir() / "recipes" / recipe)
    except Exception as exc:  # a refusal is compared like any other result
        yield Built(None, None, error=str(exc))
        return
    for loaded in every:
        variant = loaded.variant
        selector = None if variant is None or variant.selector == "plain" else variant.selector
        try:
            plan = kit.plan_loaded(found, loaded)
        except Exception as exc:  # a refusal is compared like any other result
            yield Built(selector, None, error=str(exc))
            continue
        yield Built(selector, plan, loaded.recipe.benchmark.type)


# --- normalisation ---------------------------------------------------------------------------


def _placeholders(text: str) -> str:
    """One spelling of run-time values on both sides: node addresses and the log dir."""
    text = re.sub(r"<ip:node(\d+)>", r"<node\1-ip>", text)
    return text.replace("<LOG_DIR>", "<logs>").replace("<job_dir>/logs", "<logs>")


def _canonical(value: str, used: set[str]) -> str:
    """A Python-repr mapping (srtctl) and its JSON (srt) compare equal (json-config-values)."""
    if value[:1] in "{[":
        try:
            parsed = json.loads(value)
        except ValueError:
            try:
                parsed = ast.literal_eval(value)
            except (ValueError, SyntaxError):
                return value
            used.add("json-config-values")
        return json.dumps(parsed, sort_keys=True)
    return value


Group = tuple[str, tuple[str, ...]]


def flag_groups(argv: list[str], used: set[str]) -> list[Group]:
    """``--flag v1 v2`` groups after the module (``--k=v`` split)."""
    groups: list[tuple[str, list[str]]] = []
    for token in argv:
        word = _placeholders(token)
        if word.startswith("--"):
            name, eq, value = word.partition("=")
            groups.append((name, [value] if eq else []))
        elif groups:
            groups[-1][1].append(_canonical(word, used))
        else:
            groups.append(("", [word]))
    return [(n, tuple(v)) for n, v in groups]


def module_of(argv: list[str]) -> tuple[str, list[str]]:
    """The program (``-m module``, else the executable's name) and the arguments after it."""
    if "-m" in argv:
        i = argv.index("-m")
        return argv[i + 1], argv[i + 2 :]
    for i, word in enumerate(argv):
        if not word.startswith("-") and "=" not in word and word not in ("numactl", "nsys"):
            return os.path.basename(word), argv[i + 1 :]
    return "", argv


@dataclass
class Comparison:
    problems: list[str] = field(default_factory=list)
    used: set[str] = field(default_factory=set)

    def check(self, what: str, got: Any, want: Any) -> None:
        if got != want:
            self.problems.append(f"{what}: srt {got!r}, srtctl {want!r}")


def _flags_of(argv: list[str], used: set[str]) -> tuple[str, Counter[Group]]:
    module, rest = module_of(argv)
    return module, Counter(flag_groups(rest, used))


def _compare_flags(
    cmp: Comparison, what: str, got_argv: list[str], want_argv: list[str], served: str | None
) -> None:
    got_module, got = _flags_of(got_argv, cmp.used)
    want_module, want = _flags_of(want_argv, cmp.used)
    cmp.check(f"{what} module", got_module, want_module)
    for name in {g[0] for g, n in want.items() if n > 1 or _repeated(want, g[0])}:
        mine = [g for g in got if g[0] == name]
        theirs = [g for g in want if g[0] == name]
        if len(mine) == 1 and got[mine[0]] == 1 and mine[0] in theirs:
            for g in theirs:  # srtctl's copy and the recipe's copy: srt passes one
                del want[g]
            want[mine[0]] = 1
            cmp.used.add("duplicate-flags")
    for counter in (got, want):
        for group in [g for g in counter if any(v.startswith("/logs/") for v in g[1])]:
            n = counter.pop(group)
            counter[(group[0], tuple(v.replace("/logs/", "<logs>/", 1) for v in group[1]))] += n
            if counter is want:
                cmp.used.add("log-dir-in-container")
    for counter in (got, want):
        for group in [g for g in counter if g[0] == "--dump-config-to"]:
            counter[("--dump-config-to", ("<file>",))] += counter.pop(group)
            if counter is want:
                cmp.used.add("log-dir-in-container")
    for group in [g for g in got if g[0] == "--http-host" and g not in want]:
        del got[group]
        cmp.used.add("node-address")
    if got_module == "dynamo.mocker" and served is not None:
        extra = ("--model-name", (served,))
        if got.get(extra) and not want.get(extra):
            del got[extra]
            cmp.used.add("mocker-model-name")
    missing = want - got
    added = got - want
    if missing or added:
        cmp.problems.append(
            f"{what} flags: srtctl only {sorted(missing.elements())}, srt only"
            f" {sorted(added.elements())}"
        )


def _repeated(groups: Counter[Group], name: str) -> bool:
    return sum(n for g, n in groups.items() if g[0] == name) > 1


def _workers_of(plan: Plan) -> list[Any]:
    return [i for u in plan.units if u.category == "workers" for i in u.instances]


def _recipe_env(process: dict[str, Any]) -> dict[str, str]:
    sources = process.get("env_sources", {})
    return {
        k: _placeholders(v)
        for k, v in process["env"].items()
        if str(sources.get(k, "")).startswith("recipe:")
    }


def compare(built: Built, exp: dict[str, Any], served: str | None = None) -> Comparison:
    cmp = Comparison()
    plan = built.plan
    if plan is None:
        cmp.problems.append(f"not planned: {built.error}")
        return cmp
    cmp.check("node count", len(plan.nodes), exp["summary"]["sbatch_nodes"][0])
    procs = exp["processes"]
    want_workers = [p for p in procs if p.get("worker")]
    got_workers = _workers_of(plan)

    def key_want(p: dict[str, Any]) -> tuple[str, str, tuple[int, ...]]:
        w = p["worker"]
        return (w["role"], w["node"], tuple(w["gpu_indices"]))

    def key_got(i: Any) -> tuple[str, str, tuple[int, ...]]:
        return (i.unit, i.node, tuple(i.gpus or ()))

    cmp.check(
        "workers (role, node, gpus)",
        sorted(key_got(i) for i in got_workers),
        sorted(key_want(p) for p in want_workers),
    )
    by_key: dict[Any, list[Any]] = {}
    for inst in got_workers:
        by_key.setdefault(key_got(inst), []).append(inst)
    for p in want_workers:
        candidates = by_key.get(key_want(p)) or []
        if not candidates:
            continue
        inst = candidates.pop(0)
        _compare_flags(cmp, p["name"], list(inst.argv), p["argv"], served)
        _compare_launch(cmp, p, inst)
        got_env = {k: _placeholders(v) for k, v in inst.env.items()}
        for k, v in _recipe_env(p).items():
            cmp.check(f"{p['name']} env {k}", got_env.get(k), v)
    _compare_frontends(cmp, plan, procs, exp)
    bench_nodes = [i.node for u in plan.units if u.category == "benchmark" for i in u.instances]
    if exp.get("benchmark") and bench_nodes:
        cmp.check("benchmark node", bench_nodes, [exp["benchmark"]["client_node"]])
    infra = exp.get("infra_services") or {}
    etcd = [i.node for u in plan.units if u.type == "etcd" for i in u.instances]
    if infra.get("node") and etcd:
        cmp.check("etcd node", etcd, [infra["node"]])
    want_bench = exp["benchmark"]["type"] if exp.get("benchmark") else "manual"
    cmp.check("benchmark", built.benchmark, BENCHMARK_OF.get(want_bench, want_bench))
    if want_bench in BENCH_ARGS:
        _compare_benchmark_args(cmp, plan, procs, want_bench)
    return cmp


def _settings_of(argv: list[str]) -> dict[str, str]:
    """The ``--key value`` words of srt-benchmarks' runner, keyed by option name."""
    rest = argv[argv.index("srt_benchmarks") + 2 :]
    return {k[2:].replace("-", "_"): v for k, v in zip(rest[::2], rest[1::2], strict=True)}


def _compare_benchmark_args(
    cmp: Comparison, plan: Plan, procs: list[dict[str, Any]], kind: str
) -> None:
    """srtctl's ``bench.sh URL ARG...`` against the settings srt's runner is given."""
    (want,) = [p["argv"] for p in procs if p["stage"] == "benchmark"]
    (got,) = [i.argv for u in plan.units if u.category == "benchmark" for i in u.instances]
    cmp.check("benchmark runner", list(got[1:4]), ["-m", "srt_benchmarks", kind])
    mine = _settings_of(list(got))
    theirs = dict(zip(BENCH_ARGS[kind], want[3:], strict=True))
    if "concurrencies" in theirs:  # srtctl joins the list with ",", srt with "x"
        theirs["concurrencies"] = theirs["concurrencies"].replace(",", "x")
    for key, value in theirs.items():
        number = re.fullmatch(r"\d+", value) and key.endswith("_ms")
        cmp.check(f"benchmark {key}", mine.get(key), f"{float(value)}" if number else value)


def _compare_launch(cmp: Comparison, p: dict[str, Any], inst: Any) -> None:
    """The launch shape of a worker: its nodes (one MPI launch across several for a trtllm
    worker wider than a node), its task count and its MPI plugin, as srtctl's srun."""
    srun = p["srun"]
    nodes = list(inst.nodes or [inst.node])
    cmp.check(f"{p['name']} launch nodes", nodes, p["nodes"])
    one_node = int(inst.srun_options.get("ntasks", "1"))
    tasks = (inst.tasks_per_node or 1) * len(nodes) if inst.nodes else one_node
    cmp.check(f"{p['name']} srun --ntasks", tasks, srun["ntasks"])
    cmp.check(f"{p['name']} srun --nodes", len(nodes), srun["nodes"])
    cmp.check(f"{p['name']} srun --mpi", inst.srun_options.get("mpi"), srun["mpi"])


def _compare_frontends(
    cmp: Comparison, plan: Plan, procs: list[dict[str, Any]], exp: dict[str, Any]
) -> None:
    want = [p for p in procs if p["stage"] == "frontend" and "nginx" not in " ".join(p["argv"])]
    got = [i for u in plan.units if u.category == "frontend" for i in u.instances]
    balancers = [i for i in got if "nginx" in " ".join(i.argv)]
    got = [i for i in got if i not in balancers]
    cmp.check("frontends", len(got), len(want))
    topo = exp["frontend_topology"]
    want_balancer = 1 if topo.get("nginx_node") else 0
    direct = want_balancer and len(want) == 1 and not balancers
    if direct:
        cmp.used.add("single-frontend-direct")
    else:
        cmp.check("balancer", len(balancers), want_balancer)
    if not direct:
        cmp.check("frontend nodes", sorted(i.node for i in got), sorted(topo["frontend_nodes"]))
        if want_balancer:
            cmp.check("balancer node", [i.node for i in balancers], [topo["nginx_node"]])
    for inst, p in zip(got, want, strict=False):
        argv = list(p["argv"])
        if direct:
            port = str(topo["frontend_port"])
            public = str(topo["public_port"])
            argv = [w.replace(port, public) if w.endswith(port) else w for w in argv]
        _compare_flags(cmp, f"frontend {p['name']}", list(inst.argv), argv, None)
        got_env = {k: _placeholders(v) for k, v in inst.env.items()}
        for k, v in _recipe_env(p).items():
            cmp.check(f"frontend env {k}", got_env.get(k), v)
