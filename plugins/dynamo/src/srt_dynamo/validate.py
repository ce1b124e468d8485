"""What the ``dynamo`` engine refuses (or warns about) in a recipe, each at its line.

A setting must never silently do nothing: a ``--request-plane nats`` written in ``args``
while ``dynamo.request_plane`` says ``tcp`` would leave srt starting (or not starting) NATS
for a plane the processes do not use, and ``--http-port 9000`` against ``frontend.port``
would leave srt probing a port nobody listens on. Such a recipe is an error, not a guess.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from srt_services.extend import Problem, Recipe

from srt_dynamo.backends import BACKENDS
from srt_dynamo.build import served_model_name
from srt_dynamo.options import MAX_SYSTEM_PORT, DynamoOptions

PathT = tuple[str | int, ...]


def flag_values(words: Sequence[str], flag: str) -> Iterator[tuple[int, str]]:
    """(index, value) of each ``--flag value`` or ``--flag=value`` in ``words`` (a word taken
    as a value is not read as a flag again)."""
    i = 0
    while i < len(words):
        word = words[i]
        if word == flag and i + 1 < len(words):
            yield i + 1, words[i + 1]
            i += 2
            continue
        if word.startswith(flag + "="):
            yield i, word[len(flag) + 1 :]
        i += 1


def _processes(recipe: Recipe) -> Iterator[tuple[PathT, list[str], list[str], dict[str, str]]]:
    """(where, command, args, env) of the frontend and every role."""
    if recipe.frontend is not None and recipe.frontend.type != "none":
        f = recipe.frontend
        yield ("frontend",), list(f.command or []), list(f.args), dict(f.env)
    for role, spec in recipe.roles.items():
        yield ("roles", role), list(spec.command or []), list(spec.args), dict(spec.env)


def _contradictions(
    where: PathT, command: list[str], args: list[str], flag: str, wanted: str, setting: str
) -> Iterator[Problem]:
    for key, words in (("command", command), ("args", args)):
        for i, value in flag_values(words, flag):
            if value != wanted:
                yield Problem(
                    (*where, key, i),
                    f"{flag} {value} contradicts {setting}: {wanted}; remove the flag (srt-dynamo"
                    f" passes {setting} to every Dynamo process) or change the setting",
                )


def plane_problems(recipe: Recipe) -> Iterator[Problem]:
    planes = {
        "--request-plane": (recipe.dynamo.request_plane, "dynamo.request_plane"),
        "--event-plane": (recipe.dynamo.event_plane, "dynamo.event_plane"),
    }
    envs = {"DYN_REQUEST_PLANE": "--request-plane", "DYN_EVENT_PLANE": "--event-plane"}
    for where, command, args, env in _processes(recipe):
        for flag, (wanted, setting) in planes.items():
            yield from _contradictions(where, command, args, flag, wanted, setting)
        for var, flag in envs.items():
            wanted, setting = planes[flag]
            if var in env and env[var] != wanted:
                yield Problem(
                    (*where, "env", var),
                    f"{env[var]} contradicts {setting}: {wanted}; remove it (srt-dynamo sets"
                    f" {var} from {setting})",
                )


def frontend_port_problems(recipe: Recipe) -> Iterator[Problem]:
    f = recipe.frontend
    if f is None or f.type == "none":
        return
    port = str(listen_port(recipe))
    setting = "frontend.internal_port" if f.replicas > 1 else "frontend.port"
    yield from _contradictions(
        ("frontend",), list(f.command or []), list(f.args), "--http-port", port, setting
    )
    if "DYN_HTTP_PORT" in f.env and f.env["DYN_HTTP_PORT"] != port:
        yield Problem(
            ("frontend", "env", "DYN_HTTP_PORT"),
            f"{f.env['DYN_HTTP_PORT']} contradicts {setting}: {port}; set {setting}"
            " instead (srt probes it and tells the benchmark)",
        )


def listen_port(recipe: Recipe) -> int:
    """Where a Dynamo frontend listens: ``frontend.port``, or ``internal_port`` for each of
    several replicas behind srt's balancer (which then owns the public port)."""
    f = recipe.frontend
    assert f is not None
    return f.internal_port if f.replicas > 1 else f.port


def built_roles(recipe: Recipe) -> list[str]:
    return [role for role, spec in recipe.roles.items() if spec.command is None]


#: Flags srt-dynamo sets only for some workers: elsewhere the recipe's copy is passed.
_PREFILL_ONLY = frozenset({"disaggregation-bootstrap-port"})


def _recipe_copy_runs(recipe: Recipe, role: str, name: str) -> bool:
    """Whether the recipe's own value of an engine-owned flag is the one the worker gets:
    a mocker knob (the config's value wins, as under srtctl), a prefill-only flag on another
    role."""
    from srt_dynamo.backends.mocker import ALWAYS, OPTIONAL

    if recipe.engine.type == "mocker" and name in (*ALWAYS, *OPTIONAL):
        return True
    return name in _PREFILL_ONLY and role != "prefill"


def worker_problems(recipe: Recipe) -> Iterator[Problem]:
    """What the workers the engine builds need from the recipe."""
    roles = built_roles(recipe)
    if not roles:
        return
    if recipe.engine.model is None:
        yield Problem(
            ("engine", "model"),
            "is required: srt-dynamo gives it to the workers it builds (a directory on every"
            " node or in the container, or a hub id)",
        )
    backend = BACKENDS.get(recipe.engine.type)
    served = served_model_name(recipe) if recipe.engine.model else None
    for role in roles:
        spec = recipe.roles[role]  # type: ignore[index]
        if backend is None or recipe.engine.type == "trtllm":
            continue
        for key in spec.config:
            name = key.replace("_", "-")
            if name == "served-model-name" and served is not None:
                if str(spec.config[key]) != served:
                    yield Problem(
                        ("roles", role, "config", key),
                        f"{spec.config[key]} contradicts the served model name {served}"
                        " (engine.served_model_name); the frontend and the probe use that one",
                    )
                continue
            if name in backend.owned and not _recipe_copy_runs(recipe, role, name):
                when = " when a connector is chosen (none: this copy is kept)"
                yield Problem(
                    ("roles", role, "config", key),
                    f"is set by srt-dynamo itself (--{name})"
                    f"{when if name == 'kv-transfer-config' else ''}; this copy is dropped",
                    warning=True,
                )


def system_port_problems(recipe: Recipe, options: DynamoOptions) -> Iterator[Problem]:
    """Dynamo exits at start when ``DYN_SYSTEM_PORT`` does not fit a signed 16-bit number."""
    count = sum(
        spec.workers * max(1, -(-(spec.gpus_per_worker or 0) // recipe.resources.gpus_per_node))
        for spec in recipe.roles.values()
        if spec.command is None
    )
    last = options.ports.system + count - 1
    if count and last > MAX_SYSTEM_PORT:
        yield Problem(
            ("engine", "options", "ports", "system"),
            f"the last worker's DYN_SYSTEM_PORT would be {last}, above {MAX_SYSTEM_PORT}, which"
            " Dynamo refuses; lower the base",
        )


def problems(recipe: Recipe, options: DynamoOptions) -> list[Problem]:
    return [
        *system_port_problems(recipe, options),
        *plane_problems(recipe),
        *frontend_port_problems(recipe),
        *worker_problems(recipe),
    ]
