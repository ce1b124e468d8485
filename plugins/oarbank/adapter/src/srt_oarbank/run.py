"""``python -m srt_oarbank.run``: ``srt oarbank run`` without srt's command-line front.

What a unit's ``uses:`` becomes (the ``oarbank`` kind's :meth:`use_command`): the plan
holds this argv, so every launch of the unit is admitted, run and released by the same
code as the command a user types, without loading srt's CLI and plugin set first.
"""

from __future__ import annotations

from srt_oarbank.srt.cli import run_cmd


def main() -> None:
    run_cmd.main(prog_name="srt oarbank run")


if __name__ == "__main__":
    main()
