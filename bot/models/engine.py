"""The triage engine: one code path from issue text to a calibrated five-axis prediction, for every caller."""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from importlib import metadata
from pathlib import Path

import numpy as np

from bot.core.domain import Case, Issue, TriageResult
from bot.core.settings import AXES, Settings
from bot.knowledge.dataset import LoadReport, default_case_files, load_case_base
from bot.knowledge.diagnostics import diagnose, diagnostics_path
from bot.knowledge.facts import NON_BUG_KINDS, missing_facts, needs_details
from bot.knowledge.taxonomy import Taxonomy, load_taxonomy
from bot.models.embedding import Embedder, EmbeddingCache
from bot.models.fitted import load_fitted, save_fitted
from bot.models.grouping import NEAR_DUPLICATE_COSINE, linked_pairs, near_duplicate_groups
from bot.models.policy import Calibrator, decide, fit_calibrator, out_of_fold, withhold_for_details
from bot.models.predictors.base import Predictor, Query, TrainingSet, make_predictor, predictor_names, training_label
from bot.models.retrieval import CaseIndex
from bot.reading.normalise import NormalisedIssue, normalise
from bot.reading.opening import case_base_text

log = logging.getLogger(__name__)

ENGINE_VERSION = "4"  # 4: retrieval, votes and calibration see only cases opened before the issue
# Fitted models are cached; a change to any code that shapes them makes the cached copies stale.
FITTING_CODE = ("models/predictors/*.py", "models/features.py", "reading/normalise.py", "models/policy.py",
                "models/engine.py", "reading/tracebacks.py", "reading/frames.py", "reading/exits.py",
                "reading/log_lines.py", "reading/canonical.py", "reading/signatures.py", "models/fitted.py",
                "reading/cues.py", "models/joint.py", "knowledge/stages.py", "knowledge/diagnostics.py",
                "reading/textmatch.py", "models/grouping.py")  # relative to the bot package
CALIBRATION_FOLDS = 5
# Libraries whose versions can change a fitted model or an embedding: part of every cache key and pack.
VERSIONED_PACKAGES = ("ddl-triage", "numpy", "scikit-learn", "scipy", "sentence-transformers", "torch",
                      "transformers")
Progress = Callable[[str, int, int], None]  # (task description, advanced by, total)


@dataclass
class Engine:
    """A fitted predictor over an embedded case base, with its calibration."""

    settings: Settings
    taxonomy: Taxonomy
    embedder: Embedder
    training: TrainingSet
    predictor: Predictor
    calibrator: Calibrator
    load_report: LoadReport
    private_cases: dict[str, str] = field(default_factory=dict)  # case id -> the only repository it serves
    source: str = "gold files"  # where the knowledge came from: "gold files" or "pack PATH"

    @property
    def index(self) -> CaseIndex:
        return self.training.index

    @property
    def model_id(self) -> str:
        llm = self.predictor.describe().get("model")
        return f"{self.embedder.model_id}+{self.predictor.name}" + (f"({llm})" if llm else "")

    def add_cases(self, cases: Sequence[Case], private: bool = False) -> int:
        """Make labelled cases retrievable at once (maintainers' corrections).

        A case whose id is already known has its labels updated, axis by axis. `private` cases are only
        retrieved for issues of their own repository (a correction in one installation never shows up in
        another's comments). Neighbours and the `knn` vote see new cases at once; fitted classifiers learn
        them at their next fit.
        """
        if not cases:
            return 0
        training, index = self.training, self.training.index
        position = {c.id: i for i, c in enumerate(index.cases)}
        fresh: list[Case] = []
        for case in cases:
            if case.id in position:
                i = position[case.id]
                known = index.cases[i]
                labels = known.labels | {axis: v for axis, v in case.labels.items() if v is not None}
                index.cases[i] = known.model_copy(update={"labels": labels})
                for axis in AXES:
                    training.targets[axis][i] = self._target(index.cases[i], axis)
            else:
                position[case.id] = len(index.cases) + len(fresh)
                fresh.append(case)
        if fresh:
            normalised = [normalise(c) for c in fresh]
            vectors = self.embedder.embed([n.text for n in normalised])
            index.cases.extend(fresh)
            training.texts.extend(n.text for n in normalised)
            index.vectors = np.vstack([index.vectors, vectors]).astype(np.float32)
            index.digests.extend(n.digests for n in normalised)
            for axis in AXES:
                training.targets[axis].extend(self._target(c, axis) for c in fresh)
            if private:
                self.private_cases.update({c.id: c.repo or "" for c in fresh})
        return len(cases)

    def _target(self, case: Case, axis: str) -> str | None:
        return training_label(case.labels, case.silver, self.taxonomy, axis, self.settings.use_silver)

    def _excluded(self, issue: Issue) -> set[str]:
        """The issue itself, and private cases of other repositories."""
        return {issue.id} | {cid for cid, repo in self.private_cases.items() if repo != (issue.repo or "")}

    def triage(self, issue: Issue) -> TriageResult:
        return self.triage_many([issue])[0]

    def read_and_triage(self, issue: Issue) -> tuple[TriageResult, NormalisedIssue]:
        """The result and the issue as it was read: the one normalisation of a triage, for the steps after it
        (the memory's recall, the comment)."""
        [(result, normalised)] = self._triage_batch([issue])
        return result, normalised

    def triage_many(self, issues: Sequence[Issue], progress: Progress | None = None,
                    batch_size: int = 64) -> list[TriageResult]:
        """Predict every issue; the issue itself is never its own neighbour, and an issue whose opening date is
        known sees only cases opened strictly before it (no neighbour, vote or shared signature from its future)."""
        return [result for result, _ in self.read_and_triage_many(issues, progress, batch_size)]

    def read_and_triage_many(self, issues: Sequence[Issue], progress: Progress | None = None,
                             batch_size: int = 64) -> list[tuple[TriageResult, NormalisedIssue]]:
        """`triage_many`, with each issue as it was read (`read_and_triage`)."""
        out: list[tuple[TriageResult, NormalisedIssue]] = []
        for start in range(0, len(issues), batch_size):
            batch = list(issues[start:start + batch_size])
            out += self._triage_batch(batch)
            if progress:
                progress("predicting", len(batch), len(issues))
        return out

    def _triage_batch(self, batch: list[Issue]) -> list[tuple[TriageResult, NormalisedIssue]]:
        normalised = [normalise(i, report=True) for i in batch]
        vectors = self.embedder.embed([n.text for n in normalised])
        excluded = [self._excluded(i) for i in batch]
        queries = make_queries(self.index, normalised, vectors, self.settings.neighbours + 5, excluded,
                               [i.created_at for i in batch])
        records = self.predictor.predict_records(queries)
        out = []
        for issue, query, record, banned in zip(batch, queries, records, excluded, strict=True):
            dist = record.distributions
            predictions = {axis: decide(axis, dist[axis], self.calibrator, self.settings.threshold(axis),
                                        raw=record.scores[axis])
                           for axis in AXES}
            out.append((self._with_missing_facts(issue, query.issue, TriageResult(
                issue_id=issue.id, predictions=predictions,
                neighbours=self.index.related(query.vector, query.hits[: self.settings.neighbours],
                                              query.issue.signatures, banned, issue.created_at),
                signatures=list(query.issue.signatures), environment=query.issue.environment,
                predictor=self.predictor.name,
                taxonomy_version=self.taxonomy.version, model_id=self.model_id, fallback=record.fallback)),
                query.issue))
        return out

    def _with_missing_facts(self, issue: Issue, normalised: NormalisedIssue, result: TriageResult) -> TriageResult:
        """Too little text for a bug report: abstain and ask for the facts; else ask for what is absent, and
        say which failures the diagnostic knowledge base recognises."""
        if needs_details(normalised) and result.label("kind") not in NON_BUG_KINDS:
            return withhold_for_details(result)
        missing = missing_facts(issue, normalised.environment, self.taxonomy, result.label("kind"),
                                result.label("symptom"), report=normalised.report)
        diagnoses = diagnose(issue.title, issue.body, framework=normalised.environment.framework,
                             kind=result.label("kind"), opened=issue.created_at)
        return result.model_copy(update={"missing_facts": missing, "diagnoses": diagnoses})


def make_queries(index: CaseIndex, normalised: Sequence[NormalisedIssue], vectors: np.ndarray, k: int,
                 exclude: list[set[str]] | None = None, before: Sequence[datetime | None] | None = None
                 ) -> list[Query]:
    hits = index.nearest(vectors, k, exclude, before)
    return [Query(issue=n, vector=v, hits=h) for n, v, h in zip(normalised, vectors, hits, strict=True)]


def build_training_set(cases: list[Case], taxonomy: Taxonomy, embedder: Embedder, use_silver: bool,
                       progress: Progress | None = None) -> tuple[TrainingSet, list[NormalisedIssue]]:
    """Normalise and embed the case base (only texts not already cached reach the model)."""
    normalised = [normalise(c) for c in cases]
    texts = [n.text for n in normalised]
    step = (lambda n: progress("embedding case base", n, len(texts))) if progress else None
    vectors = embedder.embed(texts, step) if texts else np.zeros((0, 1), dtype=np.float32)
    index = CaseIndex(cases, vectors, [n.digests for n in normalised])
    return TrainingSet.build(index, texts, taxonomy, use_silver), normalised


def fit_engine(settings: Settings, cases: list[Case], *, embedder: Embedder, predictor_name: str | None = None,
               taxonomy: Taxonomy | None = None, calibrate: bool = True, load_report: LoadReport | None = None,
               progress: Progress | None = None, use_cache: bool = True) -> Engine:
    """Fit a predictor and its calibration on `cases` (cached on disk by content when `use_cache`)."""
    taxonomy = taxonomy or load_taxonomy(settings.taxonomy)
    name = predictor_name or settings.predictor
    stored, cases = cases, case_base_text(cases, settings.case_text)  # links in later comments still group
    training, normalised = build_training_set(cases, taxonomy, embedder, settings.use_silver, progress)

    predictor = make_predictor(name, settings)
    proxy = predictor.calibration_proxy()

    def make() -> Predictor:
        # A fresh, unfitted copy of the predictor that calibration cross-validates.
        return copy.deepcopy(proxy) if proxy is not predictor else make_predictor(name, settings)

    key = _fit_key(settings, training, predictor, embedder.model_id, calibrate)
    path = settings.cache_dir / "fitted" / f"{key}.npz"
    calibrator = load_fitted(path, predictor, training) if use_cache and predictor.cacheable else None
    if calibrator is None:
        if progress:
            progress("fitting predictor", 0, 1)
        predictor.fit(training)
        calibrator = Calibrator()
        if calibrate and len(cases) >= 2 * CALIBRATION_FOLDS:
            def queries_for(train: TrainingSet, rows: list[int]) -> list[Query]:
                return make_queries(train.index, [normalised[i] for i in rows], training.index.vectors[rows],
                                    settings.neighbours + 5, before=[cases[i].created_at for i in rows])
            groups = near_duplicate_groups(training.index.vectors, NEAR_DUPLICATE_COSINE, linked_pairs(stored))
            calibrator = fit_calibrator(training, out_of_fold(make, training, queries_for, CALIBRATION_FOLDS,
                                                              settings.seed, groups))
        if use_cache and predictor.cacheable:
            save_fitted(path, predictor, calibrator)
        if progress:
            progress("fitting predictor", 1, 1)
    return Engine(settings=settings, taxonomy=taxonomy, embedder=embedder, training=training,
                  predictor=predictor, calibrator=calibrator, load_report=load_report or LoadReport())


def build_engine(settings: Settings, case_files: Sequence[Path] | None = None, predictor_name: str | None = None,
                 progress: Progress | None = None) -> Engine:
    """The engine the bot and the CLI use, with the configured predictor.

    Its knowledge is the shipped case pack (or `settings.pack`), ready in seconds; only when a data
    directory or case files are given is it fitted from the gold files (researchers, `eval/`).
    """
    taxonomy = load_taxonomy(settings.taxonomy)
    name = predictor_name or settings.predictor
    if name not in predictor_names():  # fail before the slow part
        make_predictor(name, settings)
    if not case_files and settings.data_dir is None:
        from bot.models.pack import engine_from_pack, load_pack, pack_path

        return engine_from_pack(settings, load_pack(pack_path(settings), taxonomy), name, progress)
    report = LoadReport()
    files = list(case_files) if case_files else default_case_files(settings.data_dir)
    cases = load_case_base(files, taxonomy, report)
    for error in report.errors:
        log.warning("case base: %s", error)
    embedder = Embedder(settings.embedding_model, EmbeddingCache(settings.cache_dir / "embeddings.sqlite3"))
    return fit_engine(settings, cases, embedder=embedder, predictor_name=predictor_name, taxonomy=taxonomy,
                      load_report=report, progress=progress)


def _fit_key(settings: Settings, training: TrainingSet, predictor: Predictor, model_id: str,
             calibrate: bool) -> str:
    """Identity by content: the case base, the taxonomy's labels, predictor, embedding model, code and libraries."""
    digest = hashlib.sha256()
    header = {"engine": ENGINE_VERSION, "code": code_digest(), "predictor": predictor.describe(), "model": model_id,
              "taxonomy": load_taxonomy(settings.taxonomy).labels_digest(), "silver": settings.use_silver,
              "seed": settings.seed, "k": settings.neighbours, "calibrate": calibrate,
              "packages": package_versions()}
    digest.update(json.dumps(header, sort_keys=True, default=str).encode())
    for case, text in zip(training.index.cases, training.texts, strict=True):
        digest.update(json.dumps([case.id, text, case.labels, case.silver], sort_keys=True).encode())
    return digest.hexdigest()[:32]


@functools.cache
def code_digest() -> str:
    """sha256 of the code that shapes a fitted model (a change makes cached fits stale)."""
    digest = hashlib.sha256()
    root = Path(__file__).resolve().parents[1]  # the bot package
    for pattern in FITTING_CODE:
        for path in sorted(root.glob(pattern)):
            digest.update(path.read_bytes())
    digest.update(diagnostics_path().read_bytes())  # the structure view reads the shipped knowledge base
    return digest.hexdigest()[:16]


@functools.cache
def package_versions() -> dict[str, str]:
    versions = {}
    for name in VERSIONED_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "absent"
    return versions


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
