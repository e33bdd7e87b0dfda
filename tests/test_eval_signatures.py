"""`python -m eval signatures`: coverage, recurrence and gold-symptom precision of error signatures."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

from bot.core.domain import Case
from bot.core.settings import Settings
from bot.knowledge.taxonomy import Taxonomy
from bot.models.engine import Engine
from bot.reading.normalise import normalise
from eval.signature_report import ANY, MATCHING, report_from


def test_pairs_sharing_a_signature_are_scored_on_the_gold_symptom_beside_the_cosine_floor(taxonomy: Taxonomy) -> None:
    bodies = [("RuntimeError: CUDA error: misaligned address", "device_error"),
              ("RuntimeError: CUDA error: misaligned address\nKilled", "device_error"),
              ("RuntimeError: CUDA error: misaligned address", "tensor_mismatch"),
              ("step 9\nKilled", "out_of_memory"),
              ("How do I set the pipeline schedule?", None)]
    cases = [Case(id=f"c{i}", body=b, labels={"symptom": s}) for i, (b, s) in enumerate(bodies)]
    vectors = np.array([[1, 0], [1, 0], [0, 1], [0, 1], [0, 1]], dtype=np.float32)
    report = report_from(cases, [normalise(c) for c in cases], vectors, taxonomy)
    rows = {row.name: row for row in report.rows}
    assert (rows[ANY].records, rows[ANY].recurring_records) == (4, 4)
    assert (rows["cuda"].pairs, rows["cuda"].hits) == (3, 1)  # c0-c1 agree; c2 disagrees with both
    assert (rows["signal"].pairs, rows["signal"].hits) == (1, 0)  # c1 and c3 were both killed
    assert rows[MATCHING].pairs == 3 and rows[ANY].pairs == 4
    floor = report.floors[0]
    assert (floor.pairs, floor.hits) == (2, 1)  # c0-c1 agree, c2-c3 do not; c4 has no symptom to score
    assert (report.beyond_floor.pairs, report.beyond_floor.hits) == (2, 0)  # c2 with c0 and c1, cosine 0


def test_the_command_reports_every_record_of_both_ddl_files_and_liu23(engine: Engine, settings: Settings) -> None:
    env = {**os.environ, "DDL_TRIAGE_STATE_DIR": str(settings.state_dir), "DDL_TRIAGE_DATA_DIR": str(settings.data_dir),
           "HF_HUB_OFFLINE": "1"}
    run = subprocess.run([sys.executable, "-m", "eval", "signatures"], capture_output=True, text=True, env=env,
                         timeout=600)
    assert run.returncode == 0, run.stderr
    gold = {c.id for c in engine.index.cases if c.source_file.endswith(("ddl-dev.jsonl", "ddl-dev-r3.jsonl",
                                                                        "liu23.jsonl"))}
    assert run.stdout.startswith(f"error signatures of {len(gold)} records of ddl-dev.jsonl, ddl-dev-r3.jsonl, "
                                 "liu23.jsonl")
    rows = [line.split(" | ") for line in run.stdout.splitlines() if line.startswith("| ")][1:]  # after the header
    names = [row[0].lstrip("| ") for row in rows]
    assert names[:2] == [ANY, MATCHING] and "cosine >= 0.75" in names and "cosine >= 0.80" in names
    precisions = [float(row[-1].rstrip(" |")) for row in rows if row[-1].rstrip(" |") != "-"]
    assert precisions and all(0.0 <= p <= 1.0 for p in precisions)
