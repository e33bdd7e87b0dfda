"""Scoring a stored run again under today's rules (`python -m eval report DIR --rescore`): the per-sample answers
of results.json are kept, the metrics, paired table and slices are recomputed. Samples stored before a field
existed get it from the gold files the run read (`resolution_visible`, by record id)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bot.core.settings import AXES
from bot.knowledge.taxonomy import load_taxonomy
from eval.paired import compare_all
from eval.scoring import Sample, score_samples
from eval.slices import slice_scores


def rescore(results: dict[str, Any]) -> dict[str, Any]:
    """The results object with every evaluation's axes, paired table and slices recomputed from its samples."""
    config = results["config"]
    taxonomy = load_taxonomy(config["settings"]["taxonomy"])
    thresholds = {axis: float(config["settings"]["thresholds"].get(axis, 0.5)) for axis in AXES}
    seed, resamples = int(config["seed"]), int(config["bootstrap_resamples"])
    visible = _resolution_visible(results["provenance"]["data_files"])
    for evaluation in results["evaluations"]:
        samples: dict[str, list[Sample]] = {}
        for name, predictor in evaluation["predictors"].items():
            rows = predictor["samples"]
            for sample in rows:
                sample.setdefault("resolution_visible", visible.get(sample["id"]))
            samples[name] = rows
            allowed = evaluation.get("shared_labels")
            predictor["axes"] = score_samples(rows, taxonomy, thresholds, seed=seed, resamples=resamples,
                                              allowed=allowed)
        evaluation["paired"]["comparisons"] = compare_all(samples, evaluation["paired"]["reference"], taxonomy,
                                                          seed=seed, resamples=resamples)
        if evaluation["mode"] == "cv":
            evaluation["slices"] = slice_scores(samples, taxonomy)
    results["rescored"] = True
    return results


def _resolution_visible(files: dict[str, Any]) -> dict[str, bool]:
    found: dict[str, bool] = {}
    for path in files:
        if not Path(path).is_file():
            continue
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            if line.strip():
                record = json.loads(line)
                seen = (record.get("annotation") or {}).get("resolution_visible")
                if isinstance(seen, bool):
                    found.setdefault(str(record.get("id")), seen)
    return found
