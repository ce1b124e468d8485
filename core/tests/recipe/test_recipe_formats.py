"""Recipes of other tools, read as written: a recipe-format plugin recognises a document,
lists its variants and translates each into schema 2; problems are located in the original,
`--variant` selects jobs, dry-run prints a sweep as variants, migrate writes the
translation with the original's comments."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import pytest
import srt_services
from srt_services.contracts.formats import FormatProblems, RecipeFormat, Translated, Variant
from srt_services.recipe.problems import Problem
from srt_services.testing import kit


class ToyFormat(RecipeFormat):
    """``toy: 1`` documents: ``job`` names the job, ``size`` its agg workers, and
    ``sizes: [..]`` makes one variant per size."""

    name: ClassVar[str] = "toy"
    summary: ClassVar[str] = "a test format"

    def recognises(self, data: Any) -> bool:
        return "toy" in data

    def variants(self, data: Any, source: str, settings: Any) -> list[Variant]:
        if not isinstance(data.get("job"), str):
            raise FormatProblems([Problem(("job",), "must be text")])
        sizes = data.get("sizes")
        if sizes is None:
            return [Variant("plain", data["job"])]
        return [Variant(f"sizes[{i}]", f"{data['job']}_{i}") for i in range(len(sizes))]

    def select(self, variants: list[Variant], selector: str) -> list[Variant]:
        return [v for v in variants if v.selector == selector or selector == "all"]

    def translate(self, data: Any, variant: Variant, source: str, settings: Any) -> Translated:
        size = data.get("size", 1)
        origin_of_size: tuple[str | int, ...] = ("size",)
        if variant.selector.startswith("sizes["):
            i = int(variant.selector[6:-1])
            size = data["sizes"][i]
            origin_of_size = ("sizes", i)
        doc = {
            "schema": 2,
            "name": variant.name + str(settings.get("suffix", "")),
            "observability": {"metrics": False},
            "frontend": {"type": "none"},
            "services": [{"name": "worker", "command": ["sleep", "1"], "args": [str(size)]}],
            "resources": {"gpus_per_node": size},
        }

        def origin(path: tuple[str | int, ...]) -> tuple[str | int, ...]:
            if path[:1] == ("resources",) or path[:3] == ("services", 0, "args"):
                return origin_of_size
            if path[:1] == ("name",):
                return ("job",)
            return ()

        return Translated(doc, origin, notes=["toy jobs sleep"])


class ToyPlugin:
    @srt_services.hookimpl
    def srt_register_recipe_formats(self) -> list[type[RecipeFormat]]:
        return [ToyFormat]


@pytest.fixture
def toy_plugins() -> Any:
    return kit.isolated_plugins(ToyPlugin(), "toy")


PLAIN = "# a toy job\ntoy: 1\njob: small  # the name\nsize: 4  # GPUs\n"
SWEEP = "toy: 1\njob: sweep\nsizes:\n  - 2\n  - 0\n"


def test_a_recognised_document_is_translated(toy_plugins: Any, tmp_path: Path) -> None:
    recipe = tmp_path / "toy.yaml"
    recipe.write_text(PLAIN)
    r = kit.run_cli(["dry-run", str(recipe), "--json"], toy_plugins)
    assert r.code == 0, r.stderr
    plan = json.loads(r.stdout)
    assert plan["job_name"] == "small"
    assert plan["units"][0]["instances"][0]["argv"] == ["sleep", "1", "4"]


def test_a_translated_value_is_refused_at_the_line_it_came_from(
    toy_plugins: Any, tmp_path: Path
) -> None:
    recipe = tmp_path / "sweep.yaml"
    recipe.write_text(SWEEP)  # sizes[1] = 0 translates into gpus_per_node: 0
    r = kit.run_cli(["validate", str(recipe)], toy_plugins)
    assert r.code == 2
    assert f"{recipe}:5:5: resources.gpus_per_node" in r.stderr, r.stderr


def test_a_problem_of_the_original_is_located_in_it(toy_plugins: Any, tmp_path: Path) -> None:
    recipe = tmp_path / "bad.yaml"
    recipe.write_text("toy: 1\njob: [not, text]\n")
    r = kit.run_cli(["validate", str(recipe)], toy_plugins)
    assert r.code == 2
    assert f"{recipe}:2:1: job: must be text" in r.stderr, r.stderr


def test_a_sweep_dry_runs_as_variants_and_one_can_be_picked(
    toy_plugins: Any, tmp_path: Path
) -> None:
    recipe = tmp_path / "sweep.yaml"
    recipe.write_text(SWEEP.replace("  - 0\n", "  - 8\n"))
    r = kit.run_cli(["dry-run", str(recipe), "--json"], toy_plugins)
    assert r.code == 0, r.stderr
    variants = json.loads(r.stdout)["variants"]
    assert [(v["variant"], v["selector"]) for v in variants] == [
        ("sweep_0", "sizes[0]"),
        ("sweep_1", "sizes[1]"),
    ]
    assert variants[1]["plan"]["job_name"] == "sweep_1"
    one = kit.run_cli(["dry-run", str(recipe), "--json", "--variant", "sizes[1]"], toy_plugins)
    assert json.loads(one.stdout)["job_name"] == "sweep_1"
    none = kit.run_cli(["dry-run", str(recipe), "--variant", "sizes[7]"], toy_plugins)
    assert none.code == 2
    assert "--variant sizes[7] names none of this recipe's variants" in none.stderr


def test_the_site_hands_its_format_table_to_the_format(toy_plugins: Any, tmp_path: Path) -> None:
    recipe = tmp_path / "toy.yaml"
    recipe.write_text(PLAIN)
    site = tmp_path / "site.toml"
    site.write_text('[formats.toy]\nsuffix = "_site"\n[formats.other]\nsuffix = "_no"\n')
    r = kit.run_cli(
        ["dry-run", str(recipe), "--json"], toy_plugins, env={"SRT_SITE_CONFIG": str(site)}
    )
    assert r.code == 0, r.stderr
    assert json.loads(r.stdout)["job_name"] == "small_site"
    broken = tmp_path / "broken.toml"  # a path is read once per process
    broken.write_text("[formats]\ntoy = 3\n")
    bad = kit.run_cli(["dry-run", str(recipe)], toy_plugins, env={"SRT_SITE_CONFIG": str(broken)})
    assert bad.code != 0
    assert "[formats.toy] must be a table" in bad.stderr, bad.stderr


def test_run_needs_a_variant_when_the_file_holds_several(toy_plugins: Any, tmp_path: Path) -> None:
    recipe = tmp_path / "sweep.yaml"
    recipe.write_text(SWEEP.replace("  - 0\n", "  - 8\n"))
    r = kit.run_cli(["run", str(recipe), "--job-dir", str(tmp_path / "job")], toy_plugins)
    assert r.code == 2
    assert "holds 2 jobs (sizes[0], sizes[1]): pick one with --variant SELECTOR" in r.stderr


def test_migrate_writes_the_translation_with_the_comments(toy_plugins: Any, tmp_path: Path) -> None:
    recipe = tmp_path / "toy.yaml"
    recipe.write_text(PLAIN)
    r = kit.run_cli(["migrate", "--from", "toy", str(recipe)], toy_plugins)
    assert r.code == 0, r.stderr
    out = r.stdout
    assert "Translated by `srt migrate --from toy`" in out
    assert "# a toy job" in out
    assert "name: small # the name" in out
    assert "gpus_per_node: 4 # GPUs" in out
    assert "note: toy jobs sleep" in r.stderr
    again = kit.run_cli(["validate", "-"], toy_plugins, stdin=out)
    assert again.code == 0, again.stderr


def test_an_unclaimed_foreign_recipe_says_what_to_install(tmp_path: Path) -> None:
    recipe = tmp_path / "srtctl.yaml"
    recipe.write_text("name: x\nmodel: {path: m}\nbackend: {type: sglang}\nbenchmark: {}\n")
    r = kit.run_cli(["validate", str(recipe)])
    assert r.code == 2
    assert "it looks like an srtctl recipe: install srt-srtctl" in r.stderr, r.stderr


def test_a_declared_format_that_is_not_installed_is_named(tmp_path: Path) -> None:
    recipe = tmp_path / "x.yaml"
    recipe.write_text("format: srtctl\nname: x\n")
    r = kit.run_cli(["validate", str(recipe)])
    assert r.code == 2
    assert "'srtctl' is not a known recipe format" in r.stderr
    assert "read by srt-srtctl, which is not installed" in r.stderr
