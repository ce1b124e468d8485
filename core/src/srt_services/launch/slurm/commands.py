"""The exact ``srun`` command lines (pure functions, so they can be checked without Slurm).

Environment values never go through ``--export=K=V`` strings (commas, quotes, ``$`` and
newlines would break them): the srun client is started with the service's environment
and ``--export=ALL`` hands that environment to the task unchanged. The preamble runs as
``bash -c 'preamble; exec "$@"' label argv...``, so argv is never re-parsed by a shell.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from srt_services.contracts.plan import PlannedInstance
from srt_services.launch.process import wrap_preamble


def container_flags(
    image: str | None, aliases: Mapping[str, str], mounts: Sequence[str], job_dir: str
) -> list[str]:
    """pyxis options for ``image`` (an alias from the site config, or an image name)."""
    if not image:
        return []
    resolved = aliases.get(image, image)
    all_mounts = [f"{job_dir}:{job_dir}", *mounts]
    return [
        f"--container-image={resolved}",
        f"--container-mounts={','.join(all_mounts)}",
        "--no-container-entrypoint",
        "--no-container-mount-home",
    ]


def option_flags(options: Mapping[str, str]) -> list[str]:
    """``{key: value}`` to ``--key=value``, or ``--key`` for an empty value."""
    return [f"--{k}={v}" if v != "" else f"--{k}" for k, v in options.items()]


def step_argv(
    job_id: str,
    node: str,
    name: str,
    srun: str = "srun",
    nodes: Sequence[str] = (),
    tasks_per_node: int | None = None,
) -> list[str]:
    """The start of every ``srun`` srt runs inside its allocation: one task on ``node``, a
    step named ``name`` that runs beside the job's other steps (``--overlap``). With
    ``nodes`` (one launch across several nodes, an MPI worker): ``tasks_per_node`` tasks on
    each of them, in one step, so Slurm starts, signals and ends every rank together."""
    if len(nodes) > 1:
        per = tasks_per_node or 1
        where = [
            f"--nodes={len(nodes)}",
            f"--ntasks={per * len(nodes)}",
            f"--ntasks-per-node={per}",
            f"--nodelist={','.join(nodes)}",
        ]
    else:
        where = ["--nodes=1", "--ntasks=1", f"--nodelist={node}"]
    return [srun, f"--jobid={job_id}", "--overlap", *where, f"--job-name={name}"]


def srun_argv(
    instance: PlannedInstance,
    job_id: str,
    log_path: str,
    job_dir: str,
    aliases: Mapping[str, str] | None = None,
    site_mounts: Sequence[str] = (),
    site_extra: Sequence[str] = (),
    srun: str = "srun",
) -> list[str]:
    argv = [
        *step_argv(
            job_id, instance.node, instance.step, srun, instance.nodes, instance.tasks_per_node
        ),
        f"--output={log_path}",
        "--open-mode=append",
        "--export=ALL",
    ]
    if instance.cwd:
        argv.append(f"--chdir={instance.cwd}")
    if instance.cpus_per_task:
        argv.append(f"--cpus-per-task={instance.cpus_per_task}")
    if instance.cpu_bind:
        argv.append(f"--cpu-bind={instance.cpu_bind}")
    mounts = [*site_mounts, *instance.mounts]
    argv += container_flags(instance.container, aliases or {}, mounts, job_dir)
    argv += list(site_extra)
    argv += option_flags(instance.srun_options)
    argv += wrap_preamble(instance.argv, instance.preamble, f"srt:{instance.step}")
    return argv


def oneshot_argv(
    argv: Sequence[str],
    job_id: str,
    node: str,
    name: str,
    log_path: str,
    cwd: str | None = None,
    container: list[str] | None = None,
    srun: str = "srun",
) -> list[str]:
    out = [
        *step_argv(job_id, node, name, srun),
        f"--output={log_path}",
        "--open-mode=append",
        "--export=ALL",
    ]
    if cwd:
        out.append(f"--chdir={cwd}")
    out += container or []
    return [*out, *argv]
