"""A predictor from another package, installed with pip, is found through the entry-point group and runs."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bot.core.errors import PredictorError
from bot.core.settings import Settings
from bot.knowledge.taxonomy import Taxonomy
from bot.models.predictors import base, make_predictor, predictor_names
from tests.test_predictors import fit_and_predict_oom_and_hang

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "predictor-plugin"


@pytest.fixture
def installed_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The example package pip-installed into a private target directory put on sys.path."""
    source = tmp_path / "src"
    shutil.copytree(EXAMPLE, source)
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--no-index", "--target", str(target), str(source)], check=True, capture_output=True)
    monkeypatch.syspath_prepend(str(target))
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))  # the plugin leaves with the test
    return target


def test_an_installed_plugin_predictor_is_listed_and_predicts(installed_example: Path, taxonomy: Taxonomy) -> None:
    assert "nearest-case" in predictor_names()
    predictor = make_predictor("nearest-case", Settings())
    oom, hang = fit_and_predict_oom_and_hang(predictor, taxonomy)
    assert max(oom["symptom"], key=oom["symptom"].get) == "out_of_memory"
    assert max(hang["symptom"], key=hang["symptom"].get) == "hang_timeout"


def test_a_plugin_that_fails_to_import_is_named_with_its_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    dist = tmp_path / "broken_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[ddl_triage.predictors]\nbroken = no_such_module_here:make\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))
    monkeypatch.setattr(base, "_PLUGIN_PROBLEMS", {})
    with pytest.raises(PredictorError, match=r"plugin 'broken'.*no_such_module_here.*ModuleNotFoundError"):
        make_predictor("broken", Settings())
    assert "linear" in predictor_names()  # the built-in predictors are unaffected
