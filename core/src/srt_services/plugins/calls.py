"""Calling hooks through pluggy: whole calls, one plugin's answer alone, the monitors told
about each call, and the plugin named whose implementation raised.

Nothing here decides *which* plugins are loaded before a call (that is
:mod:`srt_services.plugins.loading`): a call runs what pluggy has registered.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from srt_services.errors import PluginError

if TYPE_CHECKING:
    import pluggy

log = logging.getLogger("srt.plugins")


@dataclass(frozen=True, slots=True)
class HookCall:
    """One hook call as pluggy made it, as monitors see it.

    ``plugins`` are the implementations pluggy ran, in the order it ran them; ``result`` is
    what the call returned (for these hooks: the list of non-``None`` results, in that
    order). A registration hook is called for one plugin at a time, so its ``plugins`` has
    one entry.
    """

    hook: str
    plugins: tuple[str, ...]
    kwargs: dict[str, Any]
    result: Any
    error: BaseException | None
    duration: float

    @property
    def plugin(self) -> str:
        """The implementations as one label (one plugin for registration hooks)."""
        return ", ".join(self.plugins)


Monitor = Callable[[HookCall], None]


def trace(call: HookCall) -> None:
    """The monitor of ``SRT_TRACE_PLUGINS=1`` and ``srt -v``: one log line per call."""
    status = f"raised {type(call.error).__name__}" if call.error is not None else "ok"
    log.warning("srt-trace: %s %s %s %.2f ms", call.plugin, call.hook, status, call.duration * 1e3)


class HookCalls:
    """The hook calls of one plugin set.

    ``labels`` maps pluggy's plugin names to the labels srt shows (``srt-etcd 1.0.0``); it
    is shared with the registration, which fills it.
    """

    __slots__ = ("labels", "monitors", "pm")

    def __init__(self, pm: pluggy.PluginManager, labels: dict[str, str]) -> None:
        self.pm = pm
        self.labels = labels
        self.monitors: list[Monitor] = []

    # ------------------------------------------------------------------ monitors

    @property
    def tracing(self) -> bool:
        return trace in self.monitors

    def start_tracing(self) -> None:
        if not self.tracing:
            self.monitors.append(trace)

    def add_monitor(self, monitor: Monitor) -> Callable[[], None]:
        """Call ``monitor`` after every hook call; returns the undo."""
        self.monitors.append(monitor)

        def undo() -> None:
            if monitor in self.monitors:
                self.monitors.remove(monitor)

        return undo

    def notify(self, call: HookCall) -> None:
        for monitor in list(self.monitors):
            monitor(call)

    # ------------------------------------------------------------------ calls

    def label(self, plugin_name: str) -> str:
        return self.labels.get(plugin_name, plugin_name)

    def run(self, hook_name: str, caller: Any, kwargs: dict[str, Any]) -> list[Any]:
        """Call ``caller`` (a pluggy hook caller) with ``kwargs``; tell the monitors."""
        if not self.monitors:
            return list(caller(**kwargs))
        labels = tuple(self.label(impl.plugin_name) for impl in reversed(caller.get_hookimpls()))
        started = time.perf_counter()
        try:
            result = list(caller(**kwargs))
        except Exception as exc:
            self.notify(
                HookCall(hook_name, labels, kwargs, None, exc, time.perf_counter() - started)
            )
            raise
        self.notify(
            HookCall(hook_name, labels, kwargs, result, None, time.perf_counter() - started)
        )
        return result

    def call(self, hook_name: str, kwargs: dict[str, Any]) -> list[Any]:
        """Call a hook through pluggy: its results in pluggy's order, ``None`` skipped.

        pluggy runs ``tryfirst`` implementations first, then the others from the most
        recently registered to the first, then ``trylast`` ones; wrappers (``wrapper=True``)
        wrap the whole call. An exception names the plugin whose implementation raised.
        """
        caller = getattr(self.pm.hook, hook_name)
        try:
            return self.run(hook_name, caller, kwargs)
        except Exception as exc:
            label = self.raiser(caller, exc)
            raise PluginError(
                f"plugin {label} failed in {hook_name}: {type(exc).__name__}: {exc}"
            ) from exc
        except (KeyboardInterrupt, asyncio.CancelledError):
            raise  # the user's Ctrl-C; a cancellation of srt's own
        except BaseException as exc:  # SystemExit, a plugin's own BaseException class
            label = self.raiser(caller, exc)
            raise PluginError(
                f"plugin {label} failed in {hook_name}: raised {type(exc).__name__}: {exc}"
            ) from exc

    def only(self, plugin: object, hook_name: str) -> Any:
        """A caller of ``hook_name`` that runs ``plugin``'s implementation (and its own
        wrappers) alone, through pluggy's subset calling."""
        others = [p for p in self.pm.get_plugins() if p is not plugin]
        return self.pm.subset_hook_caller(hook_name, remove_plugins=others)

    def per_plugin(
        self, hook_name: str, kwargs: dict[str, Any]
    ) -> Iterator[tuple[str, list[Any], BaseException | None]]:
        """Each plugin's answer on its own, for hooks whose results must be attributed (a
        command to the plugin that provides it)."""
        for impl in reversed(getattr(self.pm.hook, hook_name).get_hookimpls()):
            label = self.label(impl.plugin_name)
            caller = self.only(impl.plugin, hook_name)
            try:
                answer = self.run(hook_name, caller, kwargs)
            except (KeyboardInterrupt, asyncio.CancelledError):
                raise
            except BaseException as exc:  # whatever the plugin raised is its failure
                yield label, [], exc
                continue
            yield label, answer, None

    def raiser(self, caller: Any, exc: BaseException) -> str:
        """The plugin whose implementation raised ``exc`` (innermost frame wins)."""
        codes = {}
        for impl in caller.get_hookimpls():
            code = getattr(impl.function, "__code__", None)
            if code is not None:
                codes[code] = self.label(impl.plugin_name)
        found = "?"
        tb = exc.__traceback__
        while tb is not None:
            found = codes.get(tb.tb_frame.f_code, found)
            tb = tb.tb_next
        return found
