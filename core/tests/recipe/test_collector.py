"""Loading and planning pause the garbage collector but never take anything out of its reach.

An orchestrator, a test run or a program embedding srt loads and plans recipes for as long
as it lives; an object that the collector stops seeing (``gc.freeze``) is never freed.
"""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest
from srt_services.recipe.source import gc_paused
from srt_services.testing import PluginSet, kit

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


class _Cell:
    """A weak-referenceable object to put in a reference cycle."""

    me: object = None


def _cycle() -> tuple[_Cell, weakref.ref[_Cell]]:
    cell = _Cell()
    cell.me = cell  # only the cyclic collector can free it
    return cell, weakref.ref(cell)


def _load_and_plan(plugins: PluginSet) -> object:
    return kit.plan(plugins, EXAMPLES / "disagg-services.yaml")


def test_load_and_plan_leave_everything_collectable(srt_plugins: PluginSet) -> None:
    frozen = gc.get_freeze_count()
    before, before_ref = _cycle()  # alive while the recipe is loaded and planned
    planned = _load_and_plan(srt_plugins)
    after, after_ref = _cycle()
    after.me = (after, planned)  # the plan, now held only by a cycle
    planned_ref = weakref.ref(planned)
    assert gc.get_freeze_count() == frozen  # nothing moved to the permanent generation
    assert gc.isenabled()
    del before, after, planned
    gc.collect()
    assert before_ref() is None
    assert after_ref() is None
    assert planned_ref() is None


@pytest.mark.parametrize("enabled", [True, False])
def test_the_pause_restores_the_collector_as_found(enabled: bool) -> None:
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        with gc_paused():
            assert not gc.isenabled()
            with gc_paused():  # nested: the inner block must not switch it back on
                assert not gc.isenabled()
            assert not gc.isenabled()
        assert gc.isenabled() is enabled
        with pytest.raises(RuntimeError), gc_paused():  # an error inside too
            raise RuntimeError
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()
