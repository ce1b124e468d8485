"""ProblemList: the first problems kept, the others counted (H17)."""

from __future__ import annotations

from srt_services.recipe.problems import MAX_SHOWN, Problem, ProblemList, locate


def test_the_first_errors_and_warnings_are_kept_apart_and_the_rest_counted() -> None:
    found = ProblemList()
    for i in range(MAX_SHOWN + 7):
        found.append(Problem(("args", i), "must be text"))
        found.append(Problem(("env", str(i)), "looks odd", warning=True))
    assert len(found) == 2 * MAX_SHOWN
    assert (found.more_errors, found.more_warnings) == (7, 7)
    assert found.more_errors > 0


def test_a_problem_found_again_counts_once_even_after_the_list_is_full() -> None:
    found = ProblemList()
    repeated = Problem(("services", 0, "preamble"), "bad")
    for i in range(MAX_SHOWN + 3):
        found.append(Problem(("args", i), "must be text"))
        found.append(repeated)
    assert repeated in found
    assert found.more_errors == 4  # the 3 left over, and the repeat's place taken by the first


def test_only_warnings_is_not_an_error_and_counts_carry_into_the_located_list() -> None:
    found = ProblemList([Problem((), "a warning", warning=True)])
    assert found and not [p for p in found if not p.warning]
    more = ProblemList(Problem(("x", i), "wrong") for i in range(MAX_SHOWN))
    more.count_more(1_000)
    found.extend(more)
    located = locate(found, "r.yaml", {}, lambda _path: None)
    assert sum(p.count for p in located if not p.warning) == MAX_SHOWN + 1_000
    assert located[-1].message == "and 1000 more problems like these"
