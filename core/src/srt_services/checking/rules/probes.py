"""Rules of readiness and liveness blocks, which bind each block to its probe.

A block names exactly one probe (``port`` is shorthand for ``tcp``); its settings are
validated against that probe's own model once the plugin set is known. The result is a
:class:`~srt_services.checking.settled.ProbeBinding` that travels with the service (or the
job process) it belongs to, so the planner never has to find it again.
"""

from __future__ import annotations

from difflib import get_close_matches
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from srt_services.checking.rules import strings
from srt_services.checking.settled import ProbeBinding
from srt_services.recipe import placeholders as ph
from srt_services.recipe import validation
from srt_services.recipe.pydantic_errors import shape_problems

if TYPE_CHECKING:
    from srt_services.checking.rules.context import RuleContext
    from srt_services.contracts.probe import Probe
    from srt_services.recipe.models import ProbeBlock
    from srt_services.recipe.problems import Path

PROBE_WORDS = "port, tcp, http, log or file"


class ProbeRules:
    """Checks and binds probe blocks; valid configs are shared between equal blocks."""

    __slots__ = ("_configs", "ctx")

    def __init__(self, ctx: RuleContext) -> None:
        self.ctx = ctx
        self._configs: dict[Any, Any] = {}

    def bind(
        self, path: Path, block: ProbeBlock | None, default_port: int | None, per_worker: bool
    ) -> ProbeBinding | None:
        """The block's binding; ``None`` when there is no block, or after reporting why not."""
        if block is None:
            return None
        entry = self._one_entry(path, block)
        if entry is None:
            return None
        name, raw, key_path = entry
        probe = self.ctx.plugins.probe(name)
        if not isinstance(raw, dict):
            self.ctx.add(
                key_path, f"must be a mapping of {name} settings, got {type(raw).__name__}"
            )
            return None
        config = self._config(probe, name, raw, path)
        if config is None:
            return None
        for rel, message in probe.problems(config, default_port):
            self.ctx.add((*key_path, *rel) if block.port is None else key_path, message)
        if per_worker and not probe.instance_scoped:
            self.ctx.add(
                path,
                "per-worker instances share their node's ports, so readiness must be a probe"
                f" of the instance itself (log or file), not {name}",
            )
        # the one probe setting placeholders reach (``vars``: a missing attribute on a
        # pydantic model goes through its slow ``__getattr__``)
        value = vars(config).get("path")
        if isinstance(value, str) and "{" in value:
            strings.text(
                self.ctx, (*path, name, "path"), value, ph.ALL if per_worker else ph.COMMON
            )
        return ProbeBinding(probe, config, block)

    def _one_entry(self, path: Path, block: ProbeBlock) -> tuple[str, Any, Path] | None:
        """(probe name, its raw settings, where they are written) of a block naming exactly
        one known probe; ``None`` after reporting what else it names."""
        written = block.__pydantic_extra__ or {}
        unknown = [n for n in written if not self.ctx.plugins.has("probe", n)]
        if unknown:
            self._unknown(path, block, unknown)
            return None
        if block.port is not None and "tcp" in written:
            self.ctx.add(path, "give either port (shorthand) or tcp, not both")
            return None
        # the usual block names one probe and no ``port`` shorthand: no dict to build
        entries = written if block.port is None else block.probe_entries
        if len(entries) != 1:
            got = " and ".join(sorted(entries)) if entries else "none"
            self.ctx.add(path, f"give exactly one probe ({PROBE_WORDS}), got {got}")
            return None
        ((name, raw),) = entries.items()
        return name, raw, (*path, "port") if block.port is not None else (*path, name)

    def _unknown(self, path: Path, block: ProbeBlock, unknown: list[str]) -> None:
        """Keys that name no probe: a misspelt setting or probe, with the closest match."""
        probes = sorted(self.ctx.plugins.probes())
        settings = [f for f in type(block).model_fields if f != "port"]
        for name in unknown:
            close = get_close_matches(name, ["port", *probes, *settings], n=1)
            if close and close[0] in settings:
                self.ctx.add((*path, name), f"unknown key; did you mean {close[0]!r}?")
                continue
            hint = f"; did you mean {close[0]!r}?" if close else ""
            self.ctx.add(
                (*path, name),
                f"unknown probe {name!r}{hint} (known: port, {', '.join(probes)})",
            )

    def _config(self, probe: Probe, name: str, raw: dict[str, Any], path: Path) -> Any:
        """The probe's validated config, or ``None`` after reporting why it is invalid.

        Generated recipes repeat the same probe settings (``{port: 8080}``) across thousands
        of services, so a valid config is validated once and shared; configs are never
        mutated (planning copies what it needs into the plan).
        """
        try:
            # types in the key: 8080.0 and True equal 8080 and 1, but strict mode refuses them
            key: Any = (name, *((k, type(v), v) for k, v in raw.items()))
            found = self._configs.get(key)
        except TypeError:  # an unhashable value (a list): validate it every time
            key, found = None, None
        if found is not None:
            return found
        try:
            config = validation.validate(probe.Config, raw)
        except ValidationError as exc:
            self.ctx.problems.extend(shape_problems(exc, probe.Config, raw, (*path, name)))
            return None
        if key is not None:
            self._configs[key] = config
        return config
