"""The case pack: the triage knowledge that ships with the package, without any issue text.

A pack is an archive (`bot/models/archive.py`: zip of `.npy` arrays and `.json` documents, no pickle) holding
- `manifest.json`: format and version, taxonomy version and sha256, embedding model and dimension, the
  predictor's configuration, the settings that shaped the fit, every data file's sha256 and record count,
  the library versions and a digest of the fitting code;
- `cases.json`: per case its id, URL, repository, number, type, state, labels, silver labels and opening date
  (`created_at`, ISO 8601 UTC, or null when the stored window shows none; no title, no body: the text belongs
  to its authors on GitHub);
- `vectors.npy`: the cases' unit-norm embeddings (float32, one row per case, in `cases.json` order);
- `signatures.json`: per case (in `cases.json` order) the digests of its error signatures (`bot/reading/signatures.py`):
  hashes only, never the canonical text, which can carry an author's words;
- `predictor.*` / `calibration.*`: the fitted default predictor and its calibration as arrays.
`ddl-triage pack build` writes it from the gold files; the same content always gives the same bytes.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bot.core.domain import Case
from bot.core.errors import ConfigError
from bot.core.paths import shipped_dir
from bot.core.settings import Settings
from bot.knowledge.dataset import LoadReport, default_case_files, load_case_base
from bot.knowledge.taxonomy import Taxonomy
from bot.models.archive import Archive, read_archive, write_archive
from bot.models.embedding import Embedder, EmbeddingCache
from bot.models.engine import Engine, Progress, code_digest, file_sha256, fit_engine, package_versions
from bot.models.fitted import fitted_archive, restore_fitted
from bot.models.predictors.base import TrainingSet, make_predictor
from bot.models.retrieval import CaseIndex
from bot.reading.signatures import DIGEST_CHARS, SIGNATURE_SCHEME

log = logging.getLogger(__name__)

PACK_FORMAT = "ddl-triage-pack"
PACK_FORMAT_VERSION = 3  # 2: signatures.json; 3: each case's opening date (created_at)
DIGEST = re.compile(rf"[0-9a-f]{{{DIGEST_CHARS}}}")
CASE_FIELDS = ("id", "url", "repo", "number", "type", "state", "labels", "silver", "source_file", "created_at")


class PackError(ConfigError):
    """A pack that cannot serve: damaged, of another format, taxonomy or model, or out of step with the data."""


@dataclass
class Pack:
    path: Path
    manifest: dict[str, Any]
    cases: list[Case]
    vectors: np.ndarray
    archive: Archive
    digests: list[tuple[str, ...]]  # per case, its error signatures' digests


def pack_path(settings: Settings) -> Path:
    """`settings.pack` when set, else the pack shipped for the configured taxonomy."""
    return settings.pack or shipped_dir("packs") / f"{settings.taxonomy}.npz"


def data_files_digest(files: list[Path]) -> list[dict[str, Any]]:
    return [{"file": f.name, "sha256": file_sha256(f)} for f in files]


def build_pack(settings: Settings, out: Path, progress: Progress | None = None) -> Pack:
    """Fit the default engine on the gold files of `settings.data_dir` and write its text-free pack."""
    files = default_case_files(settings.data_dir)
    from bot.knowledge.taxonomy import load_taxonomy

    taxonomy = load_taxonomy(settings.taxonomy)
    report = LoadReport()
    cases = load_case_base(files, taxonomy, report)
    for error in report.errors:
        log.warning("case base: %s", error)
    embedder = Embedder(settings.embedding_model, EmbeddingCache(settings.cache_dir / "embeddings.sqlite3"))
    engine = fit_engine(settings, cases, embedder=embedder, taxonomy=taxonomy, load_report=report,
                        progress=progress)
    archive = fitted_archive(engine.predictor, engine.calibrator)
    archive.arrays["vectors"] = engine.index.vectors.astype(np.float32)
    archive.documents["cases"] = [_case_record(c) for c in engine.index.cases]
    archive.documents["signatures"] = [list(d) for d in engine.index.digests]
    counts = {path.name: 0 for path in files}
    for case in engine.index.cases:
        counts[Path(case.source_file).name] = counts.get(Path(case.source_file).name, 0) + 1
    archive.documents["manifest"] = {
        "format": PACK_FORMAT, "format_version": PACK_FORMAT_VERSION,
        "taxonomy": {"version": taxonomy.version, "labels_sha256": taxonomy.labels_digest()},
        "embedding": {"model": embedder.model_id, "dimension": int(engine.index.vectors.shape[1])},
        "predictor": {"name": settings.predictor, "describe": engine.predictor.describe()},
        "settings": {"use_silver": settings.use_silver, "seed": settings.seed, "neighbours": settings.neighbours,
                     "case_text": settings.case_text},
        "data": [d | {"cases": counts.get(d["file"], 0)} for d in data_files_digest(files)],
        "cases": len(engine.index.cases), "code": code_digest(), "packages": package_versions(),
        "signatures": {"scheme": SIGNATURE_SCHEME, "digest": f"sha256 of kind and canonical text, {DIGEST_CHARS} hex",
                       "cases_with_one": sum(1 for d in engine.index.digests if d)},
    }
    write_archive(out, archive)
    return load_pack(out, taxonomy)


def _case_record(case: Case) -> dict[str, Any]:
    record = {name: getattr(case, name) for name in CASE_FIELDS}
    record["source_file"] = Path(case.source_file).name
    record["created_at"] = case.created_at.isoformat() if case.created_at else None
    return record


def load_pack(path: Path, taxonomy: Taxonomy | None = None) -> Pack:
    """Read and check a pack; with `taxonomy`, refuse one built for another taxonomy file."""
    archive = read_archive(path)
    manifest = archive.documents.get("manifest")
    if not isinstance(manifest, dict) or manifest.get("format") != PACK_FORMAT:
        raise PackError(f"{path}: not a ddl-triage pack (no manifest of format {PACK_FORMAT!r})")
    if manifest.get("format_version") != PACK_FORMAT_VERSION:
        raise PackError(f"{path}: pack format {manifest.get('format_version')}, this ddl-triage reads "
                        f"{PACK_FORMAT_VERSION}; rebuild it with `ddl-triage pack build`")
    try:
        cases = [Case(**record) for record in archive.documents["cases"]]
        vectors = archive.arrays["vectors"]
        digests = _read_digests(archive.documents["signatures"])
    except (KeyError, TypeError, ValueError) as exc:
        raise PackError(f"{path}: damaged pack ({exc}); rebuild it with `ddl-triage pack build`") from None
    if vectors.ndim != 2 or len(vectors) != len(cases) or len(cases) != manifest.get("cases") \
            or len(digests) != len(cases):
        raise PackError(f"{path}: damaged pack ({len(cases)} cases, vectors {vectors.shape}, {len(digests)} "
                        "signature lists); rebuild it")
    if manifest.get("signatures", {}).get("scheme") != SIGNATURE_SCHEME:
        raise PackError(f"{path}: its error signatures follow scheme {manifest.get('signatures', {}).get('scheme')}, "
                        f"this ddl-triage makes scheme {SIGNATURE_SCHEME}; rebuild it with `ddl-triage pack build`")
    if taxonomy is not None:  # only the labels matter: the comment's wording (titles, facts) may change freely
        expected = taxonomy.labels_digest()
        if manifest["taxonomy"].get("labels_sha256") != expected:
            raise PackError(f"{path}: built for other taxonomy labels (labels sha256 "
                            f"{manifest['taxonomy'].get('labels_sha256')}, installed {taxonomy.version} has "
                            f"{expected}); rebuild it with `ddl-triage pack build`")
    return Pack(path=path, manifest=manifest, cases=cases, vectors=vectors, archive=archive, digests=digests)


def _read_digests(document: Any) -> list[tuple[str, ...]]:
    """signatures.json: a list (one per case) of lists of hex digests; anything else is damage."""
    if not isinstance(document, list):
        raise ValueError("signatures.json is not a list")
    digests = [tuple(d) for d in document]
    if not all(isinstance(x, str) and DIGEST.fullmatch(x) for d in digests for x in d):
        raise ValueError(f"signatures.json holds something other than {DIGEST_CHARS}-hex digests")
    return digests


def check_in_step(pack: Pack, data_dir: Path | None) -> None:
    """Refuse a pack whose data files differ from the gold files of `data_dir` (a stale or foreign pack)."""
    files = default_case_files(data_dir)
    have = {d["file"]: d["sha256"] for d in pack.manifest["data"]}
    want = {d["file"]: d["sha256"] for d in data_files_digest(files)}
    if have != want:
        changed = sorted(name for name in set(have) | set(want) if have.get(name) != want.get(name))
        raise PackError(f"{pack.path}: built from other data than {data_dir} (differs: {', '.join(changed)}); "
                        "rebuild it with `ddl-triage pack build --data-dir DIR`")


def engine_from_pack(settings: Settings, pack: Pack, predictor_name: str, progress: Progress | None = None) -> Engine:
    """The engine on the pack's knowledge: no gold files, no fitting."""
    from bot.knowledge.taxonomy import load_taxonomy

    taxonomy = load_taxonomy(settings.taxonomy)
    embedding = pack.manifest["embedding"]
    if embedding["model"] != settings.embedding_model:
        raise PackError(f"{pack.path}: built with embedding model {embedding['model']!r}, configured "
                        f"{settings.embedding_model!r}; unset DDL_TRIAGE_EMBEDDING_MODEL or rebuild the pack")
    if progress:
        progress("loading case pack", 0, 1)
    index = CaseIndex(pack.cases, pack.vectors.astype(np.float32), pack.digests)
    packed = pack.manifest["settings"]
    training = TrainingSet.build(index, [""] * len(pack.cases), taxonomy, bool(packed["use_silver"]))
    predictor = make_predictor(predictor_name, settings)
    target = predictor.packed_part()  # the part that the pack fits (e.g. the llm predictor's fallback)
    if target is None:
        raise PackError(f"the {predictor_name} predictor has to be fitted on the gold files; the pack holds "
                        f"{pack.manifest['predictor']['name']!r}: pass --data-dir (DDL_TRIAGE_DATA_DIR)")
    try:
        calibrator = restore_fitted(pack.archive, target, training)
    except Exception as exc:  # any mismatch between the pack and this predictor
        raise PackError(f"{pack.path}: cannot serve the {predictor_name} predictor ({exc}); pass --data-dir "
                        "to fit it from the gold files, or rebuild the pack") from None
    if target is not predictor:
        predictor.bind(training)
    if progress:
        progress("loading case pack", 1, 1)
    embedder = Embedder(settings.embedding_model, EmbeddingCache(settings.cache_dir / "embeddings.sqlite3"))
    return Engine(settings=settings, taxonomy=taxonomy, embedder=embedder, training=training, predictor=predictor,
                  calibrator=calibrator, load_report=LoadReport(), source=f"pack {pack.path}")


def describe_pack(pack: Pack) -> dict[str, Any]:
    """What `ddl-triage pack info` prints."""
    m = pack.manifest
    by_type: dict[str, int] = {}
    for case in pack.cases:
        by_type[case.type or "unknown"] = by_type.get(case.type or "unknown", 0) + 1
    return {"path": str(pack.path), "sha256": file_sha256(pack.path), "bytes": pack.path.stat().st_size,
            "format": f"{m['format']} v{m['format_version']}", "taxonomy": m["taxonomy"],
            "embedding": m["embedding"], "predictor": m["predictor"], "settings": m["settings"],
            "cases": m["cases"], "cases_by_type": by_type, "signatures": _signature_summary(pack),
            "data": m["data"], "code": m["code"],
            "packages": m["packages"]}


def _signature_summary(pack: Pack) -> dict[str, Any]:
    """How many cases carry an error signature, and how many digests recur between cases."""
    holders: dict[str, int] = {}
    for digests in pack.digests:
        for d in digests:
            holders[d] = holders.get(d, 0) + 1
    return {"scheme": pack.manifest["signatures"]["scheme"], "cases_with_one": sum(1 for d in pack.digests if d),
            "distinct": len(holders), "recurring": sum(1 for n in holders.values() if n > 1)}
