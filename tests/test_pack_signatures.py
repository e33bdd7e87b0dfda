"""Error signatures in the case pack and the engine: digests only, round-tripped, and neighbours that share one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bot.core.domain import Case, Issue
from bot.core.settings import Settings
from bot.knowledge.taxonomy import Taxonomy
from bot.models.archive import read_archive, write_archive
from bot.models.engine import Engine
from bot.models.pack import Pack, PackError, build_pack, engine_from_pack, load_pack, pack_path
from bot.models.retrieval import CaseIndex
from bot.reading.normalise import normalise
from bot.reading.signatures import error_signatures, signature

NO_KERNEL_IMAGE = "no kernel image is available for execution on the device"


@pytest.fixture(scope="module")
def built(engine: Engine, settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Pack:
    """A pack built from the gold files (the session engine has filled the caches it reuses)."""
    return build_pack(settings, tmp_path_factory.mktemp("pack") / "ddl-v1.npz")


def test_the_pack_round_trips_every_cases_signature_digests(built: Pack, engine: Engine, taxonomy: Taxonomy) -> None:
    assert [c.id for c in built.cases] == [c.id for c in engine.index.cases]
    assert built.digests == engine.index.digests
    assert sum(1 for d in built.digests if d) > 50  # about a fifth of the gold threads show a signature
    reloaded = load_pack(built.path, taxonomy)
    assert reloaded.digests == built.digests
    assert built.manifest["signatures"]["cases_with_one"] == sum(1 for d in built.digests if d)


def test_the_pack_holds_digests_and_no_signature_text(built: Pack, engine: Engine) -> None:
    texts = {s.text for case in engine.index.cases for s in normalise(case).signatures}
    long_texts = {t for t in texts if len(t) >= 20}
    assert len(long_texts) > 50
    archive = read_archive(built.path)
    packed = json.dumps(archive.documents, ensure_ascii=False)
    packed += " ".join(str(v) for a in archive.arrays.values() if a.dtype.kind in "US" for v in a.ravel())
    assert not [t for t in long_texts if t in packed]
    assert all(len(d) == 16 and int(d, 16) >= 0 for digests in archive.documents["signatures"] for d in digests)


def test_pack_build_with_a_data_directory_writes_the_digests_and_pack_info_counts_them(
        built: Pack, settings: Settings, tmp_path: Path) -> None:
    out = tmp_path / "from-cli.npz"
    env = {**os.environ, "DDL_TRIAGE_STATE_DIR": str(settings.state_dir), "HF_HUB_OFFLINE": "1"}
    build = ["pack", "build", "--data-dir", str(settings.data_dir), "--out", str(out)]
    for args in (build, ["pack", "info", str(out)]):
        run = subprocess.run([sys.executable, "-m", "bot.cli.main", *args], capture_output=True, text=True, env=env,
                             timeout=900)
        assert run.returncode == 0, run.stderr
    info = json.loads(run.stdout)
    assert info["format"] == "ddl-triage-pack v3"
    assert info["signatures"]["cases_with_one"] == sum(1 for d in built.digests if d)
    assert 0 < info["signatures"]["recurring"] < info["signatures"]["distinct"]
    assert load_pack(out).digests == built.digests


def test_a_pack_case_sharing_the_issues_signature_is_marked_with_the_issues_canonical_text(
        built: Pack, settings: Settings, engine: Engine) -> None:
    pack_engine = engine_from_pack(settings.model_copy(update={"data_dir": None}), built, "default")
    issue = Issue(id="new-1", title="Serving a fine-tuned model fails on our new cards",
                  body="Loading works, the first generate() call dies:\n"
                       f"RuntimeError: CUDA error: {NO_KERNEL_IMAGE}\nWe use the prebuilt wheel.")
    result = pack_engine.triage(issue)
    assert NO_KERNEL_IMAGE in {s.text for s in result.signatures}
    shared = signature("no_kernel_image", NO_KERNEL_IMAGE)
    holders = {engine.index.cases[j].id for j in engine.index.holding(shared.digest)}
    assert holders, "the gold data shows this error"
    marked = {n.id: n.signature for n in result.neighbours if n.signature}
    assert holders <= set(marked)
    assert {marked[i] for i in holders} <= {s.text for s in result.signatures}


def test_a_case_sharing_a_signature_joins_the_neighbours_whatever_its_cosine_but_not_on_a_bare_signal() -> None:
    cases = [Case(id=f"o/r#{i}", url=f"https://github.com/o/r/issues/{i}", labels={"symptom": s})
             for i, s in enumerate(("device_error", "segmentation_fault", "none"))]
    vectors = np.array([[0.0, 1.0], [0.0, 1.0], [1.0, 0.0]], dtype=np.float32)
    kernel = error_signatures(f"RuntimeError: CUDA error: {NO_KERNEL_IMAGE}")
    killed = error_signatures("Segmentation fault (core dumped)")
    index = CaseIndex(cases, vectors, [tuple(s.digest for s in kernel), tuple(s.digest for s in killed), ()])
    query = np.array([1.0, 0.0], dtype=np.float32)
    issue_signatures = (*kernel, *killed)
    neighbours = index.related(query, [(2, 1.0)], issue_signatures, exclude=set())
    assert [(n.id, n.score, n.signature) for n in neighbours] == [
        ("o/r#2", 1.0, None), ("o/r#0", 0.0, kernel[0].text)]
    assert index.related(query, [(2, 1.0)], issue_signatures, exclude={"o/r#0"})[1:] == []
    beside = index.related(query, [(2, 1.0), (1, 0.1)], issue_signatures, exclude=set())
    assert beside[1].id == "o/r#1" and beside[1].signature == "SIGSEGV"  # marked when near, never pulled in


def test_an_older_pack_or_another_signature_scheme_is_refused_naming_the_fix(built: Pack, taxonomy: Taxonomy,
                                                                              tmp_path: Path) -> None:
    for change, message in ((("format_version", 1), "pack format 1"),
                            (("signatures", {"scheme": "0"}), "signatures follow scheme 0")):
        archive = read_archive(built.path)
        archive.documents["manifest"][change[0]] = change[1]
        path = tmp_path / f"{change[0]}.npz"
        write_archive(path, archive)
        with pytest.raises(PackError, match=f"{message}.*rebuild it"):
            load_pack(path, taxonomy)
    archive = read_archive(built.path)
    archive.documents["signatures"] = archive.documents["signatures"][:-1]
    write_archive(tmp_path / "short.npz", archive)
    with pytest.raises(PackError, match="damaged pack"):
        load_pack(tmp_path / "short.npz", taxonomy)


def test_the_shipped_pack_holds_the_digests_the_gold_cases_give_today(settings: Settings, engine: Engine,
                                                                      taxonomy: Taxonomy) -> None:
    """Fails when the canonicaliser changed and nobody rebuilt the pack (`ddl-triage pack build`)."""
    shipped = load_pack(pack_path(settings.model_copy(update={"pack": None})), taxonomy)
    today = dict(zip((c.id for c in engine.index.cases), engine.index.digests, strict=True))
    assert {c.id: d for c, d in zip(shipped.cases, shipped.digests, strict=True)} == today
