"""What halving the two errors of issue #16 would take: usage questions called `bug_report`, and
`data_model_preparation` called `training`.

On the folds of `bench/label_views.py` (the task's grouped folds, the first `--repeats` repetitions; its
`--folds-cache` is read, or written when missing), starting from the default's fused views, three things are
measured, each against `linear-fused`'s four views (paired 95% bootstrap interval):

1. **Moving the boundary**: the label's fused probability multiplied by a factor before the top label is taken.
   Shows what a halving bought by a bias alone costs in accuracy.
2. **Candidate signals**, each a balanced logistic regression per axis fitted on each fold's training part and
   fused as one more view on the axis it speaks to: the opening post's words (the thread's later comments
   left out), the error region's words (error lines, the traceback's function names, the exception), the
   phase phrases of the prose (loading, converting, building, a config or batch size against steps, loss,
   iterations, throughput), and more question cues (a "?" anywhere, "why", "is this expected", Chinese
   question particles) with their conjunction with "no failure shown".
3. **The structure view trusted more where a traceback is shown** (its weight raised only for those reports).

    python bench/label_boundaries.py [--repeats 2] [--folds-cache FILE.json] [--jobs 2]
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from label_views import ERRORS, cached_folds, decode, samples_of, score, task_splits
from scipy import sparse
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression

from bot.knowledge.stages import issue_tokens
from bot.models.engine import build_training_set
from bot.models.joint import JOINT_AXES
from bot.models.predictors.base import normalise_distribution
from bot.models.predictors.fused import FLOOR, VIEWS
from bot.models.predictors.structured import AXIS_VIEWS
from bot.reading.cues import cue_flags
from bot.reading.normalise import NormalisedIssue, normalise
from eval.jobs import make_embedder

Dists = dict[str, list[dict[str, float]]]
Featurize = Callable[[list[NormalisedIssue], list[NormalisedIssue]], tuple[Any, Any]]
FACTORS = (1.0, 1.2, 1.4, 1.7, 2.0, 2.5)
COMMENT_LINE = re.compile(r" · comment · ")
# The prose's phase phrases: before the first step, and during the run.
BEFORE = (r"\bconver(?:t|ts|ting|ted|sion)\b|from_pretrained|\bload(?:ing|s|ed)?\b|\bpreprocess|"
          r"\binitiali[sz](?:e|ing|ation|ed)\b|\bboost|\bbuild(?:ing)?\b|zero\.Init|\bbefore (?:the )?training|"
          r"\bpartition|\bdivisible\b|\bbatch size\b|\bconfig(?:uration)?\b|\bdata ?set|\bdata ?loader|"
          r"\btokeni[sz]|\bindex|\bweights?\b|\bstate_dict|\bstartup|\bat the (?:start|beginning)|\bcheckpoint\b|"
          r"\bnot compatible\b|\bnot supported\b|\bcpu memory\b|\bhost memory\b")
DURING = (r"\bduring training|\biteration|\bsteps?\b|\bepochs?\b|\bloss\b|\bbackward|\bgradients?\b|\bgrad\b|"
          r"\bthroughput|\btflops|\bslow|\bspeed|\bforward\b|\boptimi[sz]er step|\bconverge|\bnan\b|\bhangs?\b|"
          r"\bresum")
PHASE_PROSE = {"before": re.compile(BEFORE, re.IGNORECASE), "during": re.compile(DURING, re.IGNORECASE)}
# More question cues than bot/reading/cues.py holds, and the words of a failure.
QUESTION = {
    "title_mark": (re.compile(r"[?？]"), "title"),
    "title_why": (re.compile(r"\bwhy\b", re.IGNORECASE), "title"),
    "title_particle": (re.compile(r"吗|怎么|如何|是否|为什么|什么"), "title"),
    "post_expected": (re.compile(r"\bis (?:this|it|that) (?:expected|normal|correct|a bug|intended|right|possible)|"
                                 r"\bwhere does|\bwhy (?:does|do|is|are|did)|\bwhat (?:causes|is causing)|"
                                 r"\bi(?:'d| would) like to (?:ask|inquire|know)|\bwondering|\bany (?:example|"
                                 r"tutorial|guide)|\bam i (?:doing|using)|\bhow (?:to|can|do|should)\b",
                                 re.IGNORECASE), "post"),
    "post_particle": (re.compile(r"吗|怎么|如何|是否|请问"), "post"),
}
FAILURE_WORDS = re.compile(r"\b(?:error|exception|traceback|fail(?:s|ed|ure)?|crash(?:es|ed)?|hangs?|stuck|killed|"
                           r"segfault|oom|out of memory|nan|broken|does(?:n't| not) work|not working)\b",
                           re.IGNORECASE)


def opening_post(issue: NormalisedIssue) -> str:
    """The title and the thread's first post (up to the first "· comment ·" line of the stored window)."""
    lines = issue.body.split("\n")
    end = next((i for i, line in enumerate(lines) if i and COMMENT_LINE.search(line)), len(lines))
    return "\n".join([issue.title, *lines[:end]])


def error_region(issue: NormalisedIssue) -> str:
    failure = issue.failure
    return " ".join([*issue.signal, *(f.function for f in failure.frames), failure.exception or ""])


def phase_phrases(issue: NormalisedIssue) -> str:
    post = opening_post(issue)
    return " ".join(f"{phase}:{m.group(0).lower().replace(' ', '_')}" for phase, rx in PHASE_PROSE.items()
                    for m in rx.finditer(post))


def question_cues(issues: list[NormalisedIssue]) -> sparse.csr_matrix:
    """bot/reading/cues.py's flags, the extra question cues, "failure shown", failure words, and their conjunctions."""
    base = cue_flags([i.title for i in issues], [i.templates for i in issues], [i.body for i in issues])
    rows = []
    for issue, flags in zip(issues, base, strict=True):
        post = opening_post(issue)
        extra = [float(bool(rx.search(issue.title if where == "title" else post))) for rx, where in QUESTION.values()]
        shown = bool(issue.failure.frames or issue.failure.exception or issue.signatures)
        words = bool(FAILURE_WORDS.search(post))
        asked = bool(flags.any() or any(extra))
        rows.append([*flags, *extra, shown, words, asked and not shown, asked and not words, not (shown or words)])
    return sparse.csr_matrix(np.asarray(rows, dtype=np.float32))


def words_of(text: Callable[[NormalisedIssue], str], **params: Any) -> Featurize:
    def featurize(train: list[NormalisedIssue], test: list[NormalisedIssue]) -> tuple[Any, Any]:
        vectorizer = TfidfVectorizer(**{"ngram_range": (1, 2), "min_df": 2, "max_df": 0.5, "sublinear_tf": True,
                                        "max_features": 20000, **params})
        return vectorizer.fit_transform([text(i) for i in train]), vectorizer.transform([text(i) for i in test])
    return featurize


# name -> (featurize, C, the axes it is fused on)
CANDIDATES: dict[str, tuple[Featurize, float, tuple[str, ...]]] = {
    "opening post's words": (words_of(opening_post), 2.0, ("kind", "stage")),
    "error region's words": (words_of(error_region, max_df=1.0, token_pattern=r"[A-Za-z_]\w+"), 1.0,
                             ("stage", "symptom")),
    "phase phrases": (words_of(phase_phrases, max_df=1.0, ngram_range=(1, 1), token_pattern=r"\S+", use_idf=False,
                               binary=True, norm=None), 0.5, ("stage",)),
    "more question cues": (lambda train, test: (question_cues(train), question_cues(test)), 1.0, ("kind",)),
}


def candidate_views(splits: list[Any], settings: Any, taxonomy: Any) -> dict[str, list[Dists]]:
    """Per candidate and fold, its distributions of the test records on the axes it is fused on."""
    embedder = make_embedder(settings)
    normalised: dict[str, NormalisedIssue] = {}
    out: dict[str, list[Dists]] = {name: [] for name in CANDIDATES}
    for split in splits:
        training, _ = build_training_set(split.train, taxonomy, embedder, settings.use_silver)
        train = [normalised.setdefault(c.id, normalise(c)) for c in training.index.cases]
        test = [normalised.setdefault(c.id, normalise(c)) for c in split.test]
        for name, (featurize, c, axes) in CANDIDATES.items():
            x_train, x_test = featurize(train, test)
            dists: Dists = {}
            for axis in axes:
                rows, labels = training.rows(axis)
                model = LogisticRegression(C=c, max_iter=3000, class_weight="balanced").fit(x_train[rows], labels)
                labels_all = training.taxonomy.predictable(axis)
                dists[axis] = [{lab: float(dict(zip(model.classes_, p, strict=True)).get(lab, 0.0))
                                for lab in labels_all} for p in model.predict_proba(x_test)]
            out[name].append(dists)
    return out


def fused(fold: dict[str, Any], axis: str, row: int, extra: list[dict[str, float]] | None = None,
          weights: dict[str, float] | None = None) -> dict[str, float]:
    """The default's fusion of one record on one axis (geometric mean, optional per-view weights), with `extra`
    distributions as more views."""
    names = (*VIEWS, *AXIS_VIEWS.get(axis, ()))
    dists = [fold["views"][v][axis][row] for v in names] + (extra or [])
    w = [((weights or {}).get(v, 1.0)) for v in names] + [1.0] * len(extra or [])
    labels = tuple(dists[0])
    logs = sum(wi * np.log(np.maximum([d[lab] for lab in labels], FLOOR)) for d, wi in zip(dists, w, strict=True))
    scores = np.exp((logs - np.max(logs)) / sum(w))
    return normalise_distribution(dict(zip(labels, scores.tolist(), strict=True)), labels)


def variant(folds: list[dict[str, Any]], record: Callable[[int, dict[str, Any], str, int], dict[str, float]]
            ) -> list[Dists]:
    return [{a: [record(i, f, a, r) for r in range(len(f["ids"]))] for a in JOINT_AXES} for i, f in enumerate(folds)]


def shifted(dist: dict[str, float], label: str, factor: float) -> dict[str, float]:
    return normalise_distribution({**dist, label: dist[label] * factor}, tuple(dist))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", default="ddl-dev-cv")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--folds-cache", type=Path)
    args = parser.parse_args()
    args.stacking = False
    settings, taxonomy, splits = task_splits(args.task, args.repeats)
    folds = cached_folds(args, splits, settings)
    baseline = samples_of(folds, [decode(f, (), None, 0.0, ()) for f in folds])
    results: dict[str, Any] = {"linear-fused (its four views)": [decode(f, (), None, 0.0, ()) for f in folds],
                               "default (linear-structured)": variant(folds, lambda i, f, a, r: fused(f, a, r))}
    for axis, (label, _) in ERRORS.items():
        for factor in FACTORS[1:]:
            results[f"{label} x {factor}"] = variant(
                folds, lambda i, f, a, r, axis=axis, label=label, factor=factor:
                shifted(fused(f, a, r), label, factor) if a == axis else fused(f, a, r))
    candidates = candidate_views(splits, settings, taxonomy)
    for name, per_fold in candidates.items():
        results[f"+ {name}"] = variant(folds, lambda i, f, a, r, per_fold=per_fold:
                                       fused(f, a, r, [per_fold[i][a][r]] if a in per_fold[i] else None))
    traced = [[("frames" in issue_tokens(normalise(c))) for c in split.test] for split in splits]
    for weight in (2.0, 3.0, 5.0):
        results[f"structure x {weight} where a traceback is shown"] = variant(
            folds, lambda i, f, a, r, weight=weight:
            fused(f, a, r, weights={"structure": weight} if a == "stage" and traced[i][r] else None))
    print(f"{args.task}, first {args.repeats} repetition(s) of the folds; differences against linear-fused's four "
          "views (paired, 95% bootstrap)\n")
    print("| variant | kind acc (Δ [95%]) | kind Δ macro-F1 | stage acc (Δ [95%]) | stage Δ macro-F1 | symptom acc "
          "(Δ [95%]) | " + " | ".join(f"{g} -> {w}" for g, w in ERRORS.values()) + " | "
          + " | ".join(f"{w} -> {g}" for g, w in ERRORS.values()) + " |")
    print("|---" * 10 + "|")
    for name, dists in results.items():
        samples = samples_of(folds, dists)
        row = score(samples, baseline, taxonomy)
        reverse = [sum(1 for s in samples if s["gold"][a] == w and s["predicted"][a]["label"] == g)
                   for a, (g, w) in ERRORS.items()]
        cells = []
        for axis in JOINT_AXES:
            m = row[axis]
            lo, hi = m["accuracy_diff_ci"]
            cells.append(f"{m['accuracy']:.3f} ({m['accuracy_diff']:+.3f} [{lo:+.3f}, {hi:+.3f}])")
            if axis != "symptom":
                cells.append(f"{m['macro_f1_diff']:+.3f}")
        errors = [str(row[f"{g} -> {w}"]) for g, w in ERRORS.values()]
        print(f"| {name} | " + " | ".join([*cells, *errors, *map(str, reverse)]) + " |")


if __name__ == "__main__":
    main()
