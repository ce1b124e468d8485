"""Test helpers for srt and for plugin authors (extra ``srt-services[testing]``).

For plugin authors, enable the pytest plugin in your ``conftest.py``::

    pytest_plugins = ["srt_services.testing.pytest_plugin"]

and subclass a contract in a test module, overriding its one fixture::

    from srt_services.testing.contracts import KindCase, ServiceKindContract

    class TestMyKind(ServiceKindContract):
        @pytest.fixture
        def kind_case(self) -> KindCase:
            return KindCase(MyKind, entries=[{}, {"options": {"port": 9000}}], plugin=my_plugin)

Modules:

* :mod:`~srt_services.testing.pytest_plugin`: fixtures (an isolated plugin set with autoload
  off and your plugin in it, register-for-one-test, a hook-call recorder, a fake
  allocation/layout/instance context, loader and planner shortcuts, free ports, ``srt run``
  jobs checked for survivors, an isolated SRT_* environment); a ``conftest.py`` sets them
  to its plugin by overriding ``srt_kit_settings``.
* :mod:`~srt_services.testing.contracts`: ``ServiceKindContract``, ``ProbeContract``,
  ``PlacementContract``: the shared suites every kind, probe and placement must pass.
* :mod:`~srt_services.testing.kit`: the same helpers without pytest.
* ``survivors`` and ``jobs`` run real jobs and prove nothing of them is left behind.
* :mod:`~srt_services.testing.needs`: skip a test whose server is not installed, or fail it
  where a ``SRT_REQUIRE_*`` variable says it must be.

Everything runs through the real loader, planner and plugin facade, so a plugin that passes
here behaves the same under ``srt dry-run`` and ``srt run``. See ``docs/plugin-authors.md``.
"""
