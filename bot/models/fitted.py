"""A fitted predictor and its calibration as arrays and JSON: what the case pack and the fitted-model cache store."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np

from bot.core.errors import PredictorError
from bot.models.archive import Archive, ArchiveError, read_archive, write_archive
from bot.models.policy import Calibrator
from bot.models.predictors.base import Predictor, TrainingSet

log = logging.getLogger(__name__)


def fitted_archive(predictor: Predictor, calibrator: Calibrator) -> Archive:
    """A fitted predictor and its calibration as arrays + JSON (raises PredictorError if it cannot be)."""
    arrays, meta = predictor.state()
    cal_arrays, cal_meta = calibrator.state()
    archive = Archive(documents={"predictor": {"describe": predictor.describe(), "state": meta},
                                 "calibration": cal_meta})
    archive.arrays.update({f"predictor.{k}": v for k, v in arrays.items()})
    archive.arrays.update({f"calibration.{k}": v for k, v in cal_arrays.items()})
    return archive


def restore_fitted(archive: Archive, predictor: Predictor, training: TrainingSet) -> Calibrator:
    """Make `predictor` the fitted one the archive holds, over `training`; returns its calibration."""
    stored = archive.documents["predictor"]
    if stored["describe"] != json.loads(json.dumps(predictor.describe(), default=str)):
        raise PredictorError(f"the stored predictor is {stored['describe']}, not {predictor.describe()}")
    def part(prefix: str) -> dict[str, np.ndarray]:
        return {k[len(prefix):]: v for k, v in archive.arrays.items() if k.startswith(prefix)}
    predictor.restore(part("predictor."), stored["state"], training)
    return Calibrator.restore(part("calibration."), archive.documents["calibration"])


def load_fitted(path: Path, predictor: Predictor, training: TrainingSet) -> Calibrator | None:
    if not path.is_file():
        return None
    try:
        return restore_fitted(read_archive(path), predictor, training)
    except (ArchiveError, PredictorError, KeyError, TypeError, ValueError) as exc:
        log.warning("ignoring unreadable fitted-model cache %s: %s", path, exc)  # refitted, not fatal
        return None


def save_fitted(path: Path, predictor: Predictor, calibrator: Calibrator) -> None:
    try:
        write_archive(path, fitted_archive(predictor, calibrator))
    except PredictorError:
        return  # a predictor that cannot be stored is refitted next time
    except OSError as exc:  # a cache that cannot be written costs a refit next time, nothing more
        log.warning("could not cache the fitted %s predictor: %s", predictor.name, exc)
