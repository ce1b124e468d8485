"""The recipe-level helper server kinds share through ``srt_services.extend``."""

from __future__ import annotations

from srt_services.extend import Recipe, one_per_job_problems, switched_off_problems


def recipe(*entries: dict[str, object]) -> Recipe:
    return Recipe.model_validate({"schema": 2, "name": "r", "services": list(entries)})


def test_every_enabled_entry_after_the_first_is_refused_and_a_spare_is_not() -> None:
    r = recipe(
        {"name": "a", "type": "cache"},
        {"name": "spare", "type": "cache", "enabled": False},
        {"name": "other", "command": ["x"]},
        {"name": "b", "type": "cache"},
        {"name": "c", "type": "cache"},
    )
    problems = one_per_job_problems(r, "cache", "cache (CACHE_URL names one)")
    assert [(p.path, p.message) for p in problems] == [
        (
            ("services", i, "type"),
            "a job has one cache (CACHE_URL names one); services[a] is already one: drop this"
            " entry or set enabled: false",
        )
        for i in (3, 4)
    ]
    assert not any(p.warning for p in problems)
    assert one_per_job_problems(recipe({"name": "a", "type": "cache"}), "cache", "cache") == []


def test_a_disabled_entry_named_like_the_kind_is_warned_about_unless_another_is_enabled() -> None:
    off = {"name": "cache", "type": "cache", "enabled": False}
    problems = switched_off_problems(recipe({"name": "x", "command": ["x"]}, off), "cache", "m")
    assert [(p.path, p.message, p.warning) for p in problems] == [
        (("services", 1, "enabled"), "m", True)
    ]
    # an enabled entry of the type under another name is the server: nothing is switched off
    other = {"name": "mine", "type": "cache"}
    assert switched_off_problems(recipe(off, other), "cache", "m") == []
    spare = {"name": "spare", "type": "cache", "enabled": False}
    assert switched_off_problems(recipe(spare), "cache", "m") == []
