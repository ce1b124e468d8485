"""The site's sandbox approvals as agent command-line options (both agents take the same)."""

from __future__ import annotations

import argparse
from pathlib import Path

from oarbank_protocol.execution.sandbox import SitePolicy


def add_site_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "sandbox",
        "what the site approves for modules that declare a sandbox (bubblewrap); a module "
        "asking for more is refused before it runs",
    )
    group.add_argument(
        "--grant-path",
        type=Path,
        action="append",
        default=[],
        metavar="DIR",
        help="approve the module paths inside DIR (repeatable)",
    )
    group.add_argument(
        "--grant-network", action="store_true", help="approve network for modules that ask"
    )
    group.add_argument(
        "--allow-unconfined",
        action="store_true",
        help="run sandboxed modules unconfined when bubblewrap is missing (refused otherwise)",
    )


def site_from_args(args: argparse.Namespace) -> SitePolicy:
    return SitePolicy(
        approved_paths=tuple(Path(p).resolve() for p in args.grant_path),
        allow_network=bool(args.grant_network),
        allow_unconfined=bool(args.allow_unconfined),
    )
