"""Hooks are called through pluggy: its order, ``tryfirst``/``trylast`` and wrappers hold,
and the order the docs promise is the order a run sees."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest
from srt_services.errors import PluginError
from srt_services.extend import ImpliedService, Problem, hookimpl
from srt_services.plugins.manager import HookCall, PluginSet
from srt_services.testing import kit

RECIPE: Any = object()  # the hooks below never look at it


def implier(name: str, order: int = 100, **marks: Any) -> object:
    class Plugin:
        @hookimpl(**marks)
        def srt_implied_services(self, recipe: Any) -> list[ImpliedService]:
            return [ImpliedService({"name": name, "command": ["true"]}, f"by {name}", order=order)]

    return Plugin()


def problems(tag: str, **marks: Any) -> object:
    class Plugin:
        @hookimpl(**marks)
        def srt_validate_recipe(self, recipe: Any) -> list[Problem]:
            return [Problem((), tag)]

    return Plugin()


def messages(plugins: PluginSet) -> list[str]:
    return [p.message for p in plugins.validate_recipe(RECIPE)]


def test_results_come_in_pluggys_order_most_recent_registration_first() -> None:
    plugins = kit.isolated_plugins()
    plugins.register(problems("first"), "first")
    plugins.register(problems("second"), "second")
    assert messages(plugins) == ["second", "first"]


def test_tryfirst_and_trylast_are_honoured() -> None:
    plugins = kit.isolated_plugins()
    plugins.register(problems("early", tryfirst=True), "early")
    plugins.register(problems("plain"), "plain")
    plugins.register(problems("late", trylast=True), "late")
    assert messages(plugins) == ["early", "plain", "late"]


def test_a_wrapper_wraps_the_whole_call() -> None:
    class Filter:
        @hookimpl(wrapper=True)
        def srt_validate_recipe(self, recipe: Any) -> Generator[None, list[Any], list[Any]]:
            results = yield
            return [[p for p in items if p.message != "drop me"] for items in results]

    plugins = kit.isolated_plugins()
    plugins.register(problems("keep"), "keep")
    plugins.register(problems("drop me"), "drop")
    plugins.register(Filter(), "filter")
    assert messages(plugins) == ["keep"]


def test_implied_services_follow_their_order_whatever_the_registration_order() -> None:
    plugins = kit.isolated_plugins()
    plugins.register(implier("exporter", order=60), "exporters")
    plugins.register(implier("nats", order=20), "nats")
    plugins.register(implier("etcd", order=10), "etcd")
    plugins.register(implier("third", order=100), "third")
    assert [i.name for i in plugins.implied_services(RECIPE)] == [
        "etcd",
        "nats",
        "exporter",
        "third",
    ]


def test_equal_order_keeps_pluggys_call_order() -> None:
    plugins = kit.isolated_plugins()
    plugins.register(implier("a"), "a")
    plugins.register(implier("b"), "b")
    assert [i.name for i in plugins.implied_services(RECIPE)] == ["b", "a"]


def test_a_failing_implementation_is_named() -> None:
    class Broken:
        @hookimpl
        def srt_validate_recipe(self, recipe: Any) -> list[Problem]:
            raise ValueError("boom")

    plugins = kit.isolated_plugins()
    plugins.register(problems("fine"), "fine")
    plugins.register(Broken(), "broken")
    with pytest.raises(
        PluginError, match=r"plugin broken failed in srt_validate_recipe: ValueError: boom"
    ):
        plugins.validate_recipe(RECIPE)


def test_monitors_see_each_call_with_the_implementations_in_call_order() -> None:
    plugins = PluginSet(autoload=False, builtins=False)
    calls: list[HookCall] = []
    undo = plugins.add_monitor(calls.append)
    plugins.register(problems("one"), "one")
    plugins.register(problems("two"), "two")
    plugins.validate_recipe(RECIPE)
    undo()
    plugins.validate_recipe(RECIPE)
    (call,) = [c for c in calls if c.hook == "srt_validate_recipe"]
    assert call.plugins == ("two", "one")
    assert [p.message for items in call.result for p in items] == ["two", "one"]
    assert call.error is None


def test_report_sections_are_ordered_and_a_failing_plugin_costs_only_its_own() -> None:
    from srt_services.extend import ReportSection

    class Drawer:
        def __init__(self, title: str, order: int) -> None:
            self.title, self.order = title, order

        @hookimpl
        def srt_report_sections(self, job_dir: str) -> list[ReportSection]:
            return [ReportSection(f"{self.title} of {job_dir}", "<p></p>", self.order)]

    class Broken:
        @hookimpl
        def srt_report_sections(self, job_dir: str) -> list[ReportSection]:
            raise RuntimeError("no data")

    plugins = kit.isolated_plugins()
    plugins.register(Drawer("late", 200), "late")
    plugins.register(Broken(), "broken")
    plugins.register(Drawer("early", 10), "early")
    found = plugins.report_sections("/j")
    assert [(label, s if isinstance(s, str) else s.title) for label, s in found] == [
        ("early", "early of /j"),
        ("late", "late of /j"),
        ("broken", "RuntimeError: no data"),
    ]


def test_status_sections_are_ordered_and_a_failing_plugin_costs_only_its_own() -> None:
    from srt_services.app.status import plugin_sections
    from srt_services.cli.status_views import section_lines
    from srt_services.extend import StatusSection

    class Teller:
        def __init__(self, title: str, order: int) -> None:
            self.title, self.order = title, order

        @hookimpl
        def srt_status_sections(self, job_dir: str) -> list[StatusSection]:
            return [StatusSection(self.title, (f"of {job_dir}",), {"n": self.order}, self.order)]

    class Broken:
        @hookimpl
        def srt_status_sections(self, job_dir: str) -> list[StatusSection]:
            raise RuntimeError("socket gone")

    plugins = kit.isolated_plugins()
    plugins.register(Teller("late", 200), "late")
    plugins.register(Broken(), "broken")
    plugins.register(Teller("early", 10), "early")
    data = plugin_sections(plugins, "/j")
    assert data == [
        {"plugin": "early", "title": "early", "lines": ["of /j"], "data": {"n": 10}},
        {"plugin": "late", "title": "late", "lines": ["of /j"], "data": {"n": 200}},
        {"plugin": "broken", "error": "RuntimeError: socket gone"},
    ]
    assert section_lines(data, None) == [
        "",
        "early:",
        "  of /j",
        "",
        "late:",
        "  of /j",
        "(broken: its status section failed: RuntimeError: socket gone)",
    ]
