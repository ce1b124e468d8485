"""``srt exec JOBDIR SERVICE -- CMD``: a command run as one of the job's instances runs, to
look inside it (``docker compose exec``, ``kubectl exec``).

Locally the instance's own process says how it runs (and, when its virtual node is a
network namespace, the command enters that namespace): its environment
(``/proc/PID/environ``: the job's cookie, ``SRT_*``, the recipe's ``env``, what the site
passes through) and its working directory (``/proc/PID/cwd``). The command gets both and
is exec'd in place of ``srt``, so its exit status, terminal and signals are the user's.
Only the job's cookie is left out: the teardown stops whatever carries it by its whole
process group, and the command's group is the caller's (a shell's job, a test runner),
which is not the job's to stop.

In a Slurm job the instance runs on another node, where this process cannot read it: the
command becomes a step of the job's allocation on the instance's node (``srun --jobid
--overlap --nodelist``), in the instance's container image with the job's mounts when it
has one (pyxis starts a container of that image: the same filesystem, not the same
processes), with the environment the orchestrator gave the instance (the plan's ``env``
and the ``SRT_*`` variables, not the cookie) over this shell's, in its working directory;
``scancel`` ends such a step with the job.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from srt_services import procfs
from srt_services.errors import SrtError
from srt_services.jobdir.identity import COOKIE_VAR, INSTANCE_VAR
from srt_services.jobdir.view import JobView

if TYPE_CHECKING:
    from srt_services.app.compose import Setup
    from srt_services.contracts.plan import PlannedInstance


@dataclass(frozen=True, slots=True)
class Exec:
    """What to execute: ``argv`` with ``env`` in ``cwd``."""

    argv: list[str]
    env: dict[str, str]
    cwd: str | None
    #: where it runs, in words (for a note on stderr)
    where: str


def instance_of(view: JobView, name: str) -> PlannedInstance:
    """The one instance ``name`` (a step, a service or role with one instance, a worker)
    stands for; a name that selects several or none is refused, listing what there is."""
    from srt_services.jobdir.layout import JobDirError
    from srt_services.logview.sources import select

    plan = view.plan
    if plan is None:
        raise SrtError(f"{view.job.path} has no plan.json: nothing to exec into")
    by_step = {i.step: i for u in plan.units for i in u.instances}
    if name in by_step:
        return by_step[name]
    try:
        steps = [s.step for s in select(view, [name]) if s.step is not None]
    except JobDirError as exc:
        raise SrtError(str(exc)) from None
    if len(steps) == 1:
        return by_step[steps[0]]
    if not steps:
        raise SrtError(f"{name!r} names no instance of the job (steps: {', '.join(by_step)})")
    raise SrtError(f"{name!r} has {len(steps)} instances; name one: {', '.join(steps)}")


def prepare(where: Setup, job_dir: str, name: str, command: Sequence[str]) -> Exec:
    """How to run ``command`` as instance ``name`` of the job runs; refused (SrtError)
    when the instance is not running or cannot be reached from here."""
    if not command:
        raise SrtError("no command: srt exec JOBDIR SERVICE -- CMD [ARG...]")
    view = JobView.read(job_dir)
    inst = instance_of(view, name)
    if view.result is not None or (view.state is not None and view.state.finished):
        raise SrtError(f"the job in {view.job.path} has ended: nothing runs to exec into")
    if view.slurm_job_id is not None:
        return _slurm(where, view, inst, list(command))
    return _local(view, inst, list(command))


def _local(view: JobView, inst: PlannedInstance, command: list[str]) -> Exec:
    state = view.state
    run = state.instances.get(inst.step) if state is not None else None
    if run is None or run.pid is None or not procfs.same_process(run.pid, run.start_ticks):
        said = run.state if run is not None else "not started"
        raise SrtError(f"{inst.step} is not running ({said}): `srt status` shows the job")
    pid = run.pid
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            raw = fh.read()
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError as exc:
        raise SrtError(f"cannot read how {inst.step} (pid {pid}) runs: {exc.strerror}") from None
    env = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            env[os.fsdecode(key)] = os.fsdecode(value)
    if env.get(INSTANCE_VAR) != inst.step:
        # the PID was recycled between the look and the read, or the process scrubbed it
        raise SrtError(f"pid {pid} does not carry {INSTANCE_VAR}={inst.step}: not exec'ing")
    env.pop(COOKIE_VAR, None)
    net = view.plan.local_network if view.plan is not None else None
    if net is not None and net.mode == "namespaces":
        # the instance's node is a network namespace: the command joins it, so it sees
        # the addresses and ports the instance sees
        from srt_services.launch import netns

        command = netns.enter_argv(net, inst.node, command)
    return Exec(command, env, cwd, f"{inst.step} (pid {pid}) on {inst.node} ({inst.node_ip})")


def _slurm(where: Setup, view: JobView, inst: PlannedInstance, command: list[str]) -> Exec:
    from srt_services.app import compose
    from srt_services.launch.slurm import commands

    assert view.slurm_job_id is not None
    plan = view.plan
    assert plan is not None
    settings = compose.launch_settings(where)
    argv = [*commands.step_argv(view.slurm_job_id, inst.node, f"exec:{inst.step}"), "--export=ALL"]
    if inst.cwd:
        argv.append(f"--chdir={inst.cwd}")
    argv += commands.container_flags(
        inst.container,
        dict(settings.container_aliases),
        list(settings.container_mounts),
        view.job.path,
    )
    env = dict(os.environ)
    env.update(inst.env)
    env.update(
        {
            INSTANCE_VAR: inst.step,
            "SRT_NODE": inst.node,
            "SRT_NODE_IP": inst.node_ip,
            "SRT_JOB_DIR": view.job.path,
            "SRT_JOB_ID": plan.job_id,
        }
    )
    env.pop(COOKIE_VAR, None)
    where_text = f"{inst.step} on {inst.node} (Slurm job {view.slurm_job_id})"
    return Exec([*argv, *command], env, None, where_text)
