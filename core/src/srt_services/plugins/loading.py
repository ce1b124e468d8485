"""From entry-point records to registered plugins: discovery under the site's controls,
importing a plugin when one of its names or hooks is needed, and quarantine.

A plugin that fails to import (whatever it raises, ``SystemExit`` and
``KeyboardInterrupt`` included, or an import that does not finish in time: see
:mod:`~srt_services.plugins.guard`), or is refused when registered (unknown hooks, a
registration hook that raises, a built-in's name), is marked ``failed`` with its error and
traceback and logged; the rest of srt carries on, unless strict loading is on (``plugins.strict`` in the
site config, ``SRT_STRICT_PLUGINS=1``), which turns the failure into an error.

The core's own plugin is found here too, by name, the way an entry point names a plugin:
the plugins package imports no module of the layers the built-ins come from (probes,
launchers, placements); the composition root hands the module in, and a set made without
one imports it by its name like any other plugin.
"""

from __future__ import annotations

import importlib
import logging
import time
import traceback
from typing import TYPE_CHECKING, Any

from srt_services import __version__ as CORE_VERSION
from srt_services.errors import PluginError
from srt_services.plugins.calls import HookCall
from srt_services.plugins.discovery import Controls, PluginRecord, scan
from srt_services.plugins.guard import PluginEscaped, PluginTimedOut, import_timeout, plugin_code

if TYPE_CHECKING:
    from srt_services.plugins.calls import HookCalls
    from srt_services.plugins.registration import Registration
    from srt_services.plugins.registry import Registries, Registry

log = logging.getLogger("srt.plugins")

#: The core's own plugin (the built-ins), named as an entry point names a plugin module.
CORE_PLUGIN = "srt_services.builtin"

#: Hooks whose implementers are found through a capability declaration rather than
#: ``hook.<name>``: a plugin declaring ``command.x`` implements ``srt_cli_commands``.
HOOK_CAPABILITY = {"srt_cli_commands": "command"}


def import_target(target: str) -> Any:
    """The object an entry-point value names: ``module`` or ``module:attr.attr``."""
    module_name, _, attr = target.partition(":")
    obj: Any = importlib.import_module(module_name)
    if attr:
        for part in attr.split("."):
            obj = getattr(obj, part)
    return obj


def core_plugin() -> Any:
    """The core's own plugin module, imported by name (see :data:`CORE_PLUGIN`)."""
    return import_target(CORE_PLUGIN)


def label_of(record: PluginRecord) -> str:
    """How a plugin is named in messages and as an owner: ``<dist> <version>``."""
    return f"{record.dist} {record.version}"


def _formatted(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc))


class Loader:
    """The installed plugins of one set, each imported at most once, on demand."""

    __slots__ = (
        "by_label",
        "calls",
        "controls",
        "env",
        "records",
        "registration",
        "registries",
        "site",
    )

    def __init__(
        self,
        registration: Registration,
        registries: Registries,
        calls: HookCalls,
        *,
        site: Any = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.registration = registration
        self.registries = registries
        self.calls = calls
        self.site = site
        self.env = env
        self.controls: Controls | None = None
        self.records: list[PluginRecord] = []
        #: the record of each loaded plugin, by its label
        self.by_label: dict[str, PluginRecord] = {}

    def discover(self) -> None:
        """One scan of the entry points, each record decided under the controls (nothing is
        imported)."""
        if self.site is None:
            from srt_services import site_config

            self.site = site_config.current()
        self.controls = Controls.from_environment(self.env, self.site)
        self.records = []
        for found in scan():
            record = found.fresh()
            self.controls.decide(record)
            self.records.append(record)

    def load_all(self) -> None:
        """Import every plugin the controls allow."""
        for record in self.records:
            if record.status == "discovered":
                self.load(record)

    def ensure(self, registry: Registry[Any], name: str) -> None:
        """Load what may provide ``name``: every plugin that declares it (even when the name
        is known already, so that a clash is reported whatever was loaded before), then,
        while it is still unknown, every plugin that declares nothing."""
        capability = registry.capability
        for record in self.records:
            if record.status == "discovered" and record.declares(capability, name):
                self.load(record)
        if registry.has(name):
            return
        for record in self.records:
            if record.status == "discovered" and not record.declares_anything:
                self.load(record)

    def ensure_capability(self, capability: str) -> None:
        """Load every plugin that may register something of ``capability``: those that
        declare a name of it, and those that declare nothing (a recipe format is asked of
        every plugin that has one, not of every plugin installed)."""
        for record in self.records:
            if record.status == "discovered" and (
                record.provides.get(capability) or not record.declares_anything
            ):
                self.load(record)

    def ensure_hook(self, hook_name: str) -> None:
        """Load every plugin that may implement ``hook_name``."""
        capability = HOOK_CAPABILITY.get(hook_name)
        for record in self.records:
            if record.status != "discovered":
                continue
            if (
                record.declares("hook", hook_name)
                or not record.declares_anything
                or (capability is not None and record.provides.get(capability))
            ):
                self.load(record)

    def load(self, record: PluginRecord) -> bool:
        """Import and register one plugin; ``False`` (and the record says why) when it
        may not be imported or fails."""
        if self.controls is not None and not self.controls.admit(record, CORE_VERSION):
            log.warning("plugin %s %s not loaded: %s", record.dist, record.version, record.reason)
            return False
        started = time.perf_counter()
        try:
            with plugin_code(import_timeout(self.env)):
                obj = import_target(record.module)
        except PluginTimedOut as exc:
            self._quarantine(
                record,
                "import failed",
                f"its import {exc}; srt gave up on it (SRT_PLUGIN_IMPORT_TIMEOUT sets the"
                " limit; a plugin that declares its capabilities under srt.provides is"
                " imported only for recipes that use them)",
                None,
            )
            return False
        except PluginEscaped as exc:
            self._quarantine(record, "import failed", f"raised {exc}", exc.original)
            return False
        except Exception as exc:
            self._quarantine(record, "import failed", f"{type(exc).__name__}: {exc}", exc)
            return False
        label = label_of(record)
        self.by_label[label] = record
        try:
            self.registration.register(obj, record.dist, label)
        except PluginError as exc:
            self._quarantine(record, "rejected", str(exc), exc.__cause__)
            return False
        record.status = "loaded"
        record.hooks = self.registration.hooks_of(obj)
        record.registered = self.registries.provided_by(label)
        if self.calls.monitors:
            elapsed = time.perf_counter() - started
            self.calls.notify(HookCall("<import>", (label,), {}, obj, None, elapsed))
        return True

    def _quarantine(
        self, record: PluginRecord, reason: str, error: str, cause: BaseException | None
    ) -> None:
        """Mark a plugin failed, say so, and raise under strict loading."""
        record.status = "failed"
        record.error = error
        record.reason = reason
        if cause is not None:
            record.traceback = _formatted(cause)
        if reason == "import failed":
            log.warning("plugin %s %s failed to import: %s", record.dist, record.version, error)
        else:
            log.warning("plugin %s rejected: %s", label_of(record), error)
        # under tracing (SRT_TRACE_PLUGINS=1, ``srt -v``), the failure's traceback too
        if record.traceback and self.calls.tracing:
            log.warning("srt-trace: %s %s:\n%s", record.dist, record.version, record.traceback)
        if self.controls is not None and self.controls.strict:
            raise PluginError(
                f"plugin {record.dist} {record.version} {reason}: {error}"
                " (strict plugin loading: plugins.strict in the site config or"
                " SRT_STRICT_PLUGINS=1)"
            )
