from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from bot.core.errors import ConfigError
from bot.knowledge.taxonomy import load_taxonomy, load_taxonomy_file, taxonomy_files


@pytest.mark.parametrize("path", taxonomy_files(), ids=lambda p: p.name)
def test_every_shipped_taxonomy_loads(path: Path) -> None:
    taxonomy = load_taxonomy_file(path)
    assert taxonomy.axes, path


def test_ddl_v1_has_exactly_the_ids_and_definitions_of_the_gold_taxonomy(gold_dir: Path) -> None:
    gold = yaml.safe_load((gold_dir / "taxonomy-ddl-v1.yaml").read_text())
    ours = load_taxonomy("ddl-v1")
    assert ours.version == gold["version"]
    assert list(ours.axes) == list(gold["axes"])
    for axis, spec in gold["axes"].items():
        assert [(v["id"], v["definition"]) for v in spec["values"]] == \
            [(v.id, v.definition) for v in ours.axes[axis].values]


def test_every_fix_pattern_has_a_checklist() -> None:
    for value in load_taxonomy("ddl-v1").axis("fix_pattern").values:
        assert value.checklist, value.id


def test_liu23_maps_every_stage_onto_ddl_v1() -> None:
    liu = load_taxonomy("liu23")
    ddl = load_taxonomy("ddl-v1")
    assert {v.maps_to for v in liu.axis("stage").values} <= set(ddl.ids("stage"))
    assert liu.canonical("fix_pattern", "fix behaviour logic") == "fix behavior logic"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    return path


MINIMAL = """
version: t1
title: test
sources: {s1: a study}
axes:
  kind:
    description: d
    values:
      - {id: a, definition: x, provenance: [s1]}
      - {id: b, definition: y}
"""


def test_unknown_key_is_an_error_naming_file_and_entry(tmp_path: Path) -> None:
    path = _write(tmp_path, MINIMAL.replace("{id: b, definition: y}", "{id: b, definition: y, colour: red}"))
    with pytest.raises(ConfigError, match=r"bad\.yaml.*axes\.kind\.values\.1\.colour"):
        load_taxonomy_file(path)


def test_duplicate_id_is_an_error(tmp_path: Path) -> None:
    path = _write(tmp_path, MINIMAL.replace("{id: b,", "{id: a,"))
    with pytest.raises(ConfigError, match="duplicate id 'a'"):
        load_taxonomy_file(path)


def test_dangling_provenance_is_an_error(tmp_path: Path) -> None:
    path = _write(tmp_path, MINIMAL.replace("provenance: [s1]", "provenance: [s9]"))
    with pytest.raises(ConfigError, match=r"axes\.kind\.a: provenance 's9'"):
        load_taxonomy_file(path)


def test_dangling_mapping_is_an_error(tmp_path: Path) -> None:
    text = MINIMAL.replace("title: test", "title: test\nmaps_onto: ddl-v1").replace(
        "{id: b, definition: y}", "{id: b, definition: y, maps_to: not_a_kind}")
    with pytest.raises(ConfigError, match="maps_to 'not_a_kind' is not a kind of ddl-v1"):
        load_taxonomy_file(_write(tmp_path, text))


def test_broken_yaml_and_missing_file_say_so(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_taxonomy_file(_write(tmp_path, "axes: [unclosed"))
    with pytest.raises(ConfigError, match="taxonomy file not found"):
        load_taxonomy_file(tmp_path / "nope.yaml")
