"""``oarbank-check`` (also ``python -m oarbank_protocol.conformance``, ``srt oarbank check``):
options, manifest, output.

With ``--bundle DIR`` holding an ``oarbank-module.json``, the runner takes what the agent
would: the entry's name (``OARBANK_SERVICE``), the module's name (``OARBANK_MODULE``), its
exec (unless EXEC is given), its op timeouts and its readiness deadline, and it refuses an
entry whose ``platforms`` exclude this machine. Without a manifest, EXEC is required and the
spec's default timeouts apply.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from oarbank_protocol.agent.site import add_site_arguments, site_from_args
from oarbank_protocol.conformance.report import (
    format_junit,
    format_table,
    format_tap,
    format_text,
    passed,
)
from oarbank_protocol.conformance.runner import CHECKS, ConformanceRunner, RunnerOptions
from oarbank_protocol.errors import ExecError, ManifestError
from oarbank_protocol.execution.bundle import entry_timeouts, load_bundle
from oarbank_protocol.execution.environment import load_json_file
from oarbank_protocol.manifest import MANIFEST_FILE, ProbeSpec, ServiceSpec
from oarbank_protocol.numbers import op_timeout_arg, seconds_arg
from oarbank_protocol.platforms import current_platform, platform_matches

#: How usage messages name the program (the console script); a host passes its own
#: (``srt oarbank check``, ``python -m oarbank_protocol.conformance``).
PROG = "oarbank-check"


class UsageError(Exception):
    pass


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Check an executable against service protocol 1 (destructive: it starts, "
        "stops and destroys).",
    )
    parser.add_argument(
        "exec",
        nargs="*",
        metavar="EXEC",
        help="executable and its arguments (default: the manifest entry's exec)",
    )
    parser.add_argument(
        "--bundle",
        type=Path,
        default=Path.cwd(),
        help="bundle root: the executable's cwd; its manifest gives names and timeouts",
    )
    parser.add_argument("--data", type=Path, help="module data dir (default: a temporary one)")
    parser.add_argument(
        "--service", help="manifest entry (OARBANK_SERVICE); default: the manifest's only one"
    )
    parser.add_argument("--module", help="OARBANK_MODULE (default: the manifest's name)")
    parser.add_argument("--node-id", default="conformance-node", help="OARBANK_NODE_ID")
    parser.add_argument("--settings", type=Path, help="settings file (JSON object)")
    parser.add_argument("--tools", type=Path, help="granted host tools file (JSON object)")
    parser.add_argument("--probe", action="store_true", help="a probe: check fingerprint only")
    parser.add_argument(
        "--ready-timeout-s",
        type=seconds_arg,
        help="readiness deadline (default: the manifest's ready_timeout_s, else 60)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="repetitions for idempotency")
    parser.add_argument(
        "--timeout", type=op_timeout_arg, action="append", default=[], metavar="OP=S"
    )
    parser.add_argument(
        "--spec-only",
        action="store_true",
        help="skip the checks of srt's schemas where the spec is silent",
    )
    parser.add_argument(
        "--list", action="store_true", help="print the checks as a Markdown table and exit"
    )
    add_site_arguments(parser)
    output = parser.add_argument_group("output")
    output.add_argument("--tap", action="store_true", help="TAP on stdout")
    output.add_argument("--junit", type=Path, metavar="FILE", help="also write JUnit XML")
    return parser


def _manifest_entry(
    args: argparse.Namespace, exec_argv: list[str]
) -> tuple[ServiceSpec | ProbeSpec | None, str | None]:
    """The manifest entry to check and the module's name, when the bundle has a manifest.

    No entry when there is no manifest, or when it has several and EXEC says what to run.
    """
    if not (args.bundle / MANIFEST_FILE).is_file():
        return None, None
    bundle = load_bundle(args.bundle)
    entries: list[ServiceSpec | ProbeSpec] = list(
        bundle.manifest.probes if args.probe else bundle.manifest.services
    )
    what = _what(args)
    names = ", ".join(e.name for e in entries) or "none"
    if args.service:
        matching = [e for e in entries if e.name == args.service]
        if not matching:
            raise UsageError(f"the manifest has no {what} {args.service!r} ({names})")
        return matching[0], bundle.manifest.name
    if len(entries) == 1:
        return entries[0], bundle.manifest.name
    if not exec_argv:
        raise UsageError(f"name the {what} to check with --service ({what}s: {names})")
    return None, bundle.manifest.name


def _what(args: argparse.Namespace) -> str:
    return "probe" if args.probe else "service"


def resolve(args: argparse.Namespace) -> tuple[list[str], RunnerOptions]:
    """The argv to check and the runner's options, from the manifest when there is one."""
    settings = load_json_file(args.settings, "settings") if args.settings else {}
    options = RunnerOptions(
        bundle_root=args.bundle,
        data_dir=args.data,
        node_id=args.node_id,
        settings=settings,
        repeat=max(args.repeat, 1),
        probe=args.probe,
        spec_only=args.spec_only,
        site=site_from_args(args),
        tools=load_json_file(args.tools, "tools") if args.tools else {},
    )
    exec_argv = list(args.exec)
    entry, module = _manifest_entry(args, exec_argv)
    if entry is not None:
        if not platform_matches(entry.platforms, current_platform()):
            raise UsageError(
                f"{_what(args)} {entry.name!r} does not run on {current_platform()} "
                f"(manifest platforms: {', '.join(entry.platforms)})"
            )
        options.service = entry.name
        options.module = args.module or module or options.module
        options.timeouts = entry_timeouts(entry)
        if isinstance(entry, ServiceSpec):
            options.ready_timeout_s = entry.ready_timeout_s
            options.ready_poll_s = min(entry.ready_poll_s, 1.0)
            options.reserves_host_memory = entry.reserves_host_memory
            options.yieldable = entry.yieldable
        exec_argv = exec_argv or list(entry.exec)
        options.sandbox = load_bundle(args.bundle).manifest.sandbox
    else:
        if not exec_argv:
            raise UsageError(f"EXEC is required when {args.bundle} holds no {MANIFEST_FILE}")
        options.service = args.service or options.service
        options.module = args.module or module or options.module
    options.timeouts.update(dict(args.timeout))
    if args.ready_timeout_s is not None:
        options.ready_timeout_s = args.ready_timeout_s
    return exec_argv, options


def main(argv: list[str] | None = None, prog: str = PROG) -> int:
    args = build_parser(prog).parse_args(argv)
    if args.list:
        sys.stdout.write(format_table(CHECKS))
        return 0
    try:
        exec_argv, options = resolve(args)
    except (UsageError, ManifestError, ValueError) as exc:
        print(f"conformance: {exc}", file=sys.stderr)
        return 2
    try:
        runner = ConformanceRunner(exec_argv, options)
        results = runner.run()
    except (ValueError, ExecError) as exc:
        print(f"conformance: {exc}", file=sys.stderr)
        return 2
    if args.tap:
        sys.stdout.write(format_tap(results, runner.notes))
    else:
        sys.stdout.write(format_text(results, runner.notes))
    if args.junit:
        args.junit.write_text(format_junit(results), encoding="utf-8")
    return 0 if passed(results) else 1
