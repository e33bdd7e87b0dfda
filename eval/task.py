"""Benchmark definitions: versioned YAML in eval/tasks/, and the resolved configuration of one run."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from bot.core.errors import ConfigError
from bot.knowledge.datafile import load_yaml_model
from bot.models.predictors import predictor_names
from eval import predictors as _eval_predictors  # noqa: F401  (registers them)
from eval.folds import NEAR_DUPLICATE_COSINE
from eval.metrics import BOOTSTRAP_RESAMPLES
from eval.splits import Text

TASKS_DIR = Path(__file__).resolve().parent / "tasks"
BASELINE_PREDICTORS = ("majority", "tfidf", "knn", "linear", "default")
DEFAULT_BASELINE = "linear"
LLM_PREDICTOR = "llm"
# When `run` is given no --extra-cases, a dataset named here gets these files of its own directory
# added to every fold's case base (how the README figures are defined).
DEFAULT_EXTRA_CASES = {"ddl-dev.jsonl": ("liu23.jsonl",), "ddl-dev-r3.jsonl": ("liu23.jsonl",),
                       "ddl-dev-r4.jsonl": ("liu23.jsonl",)}
# groups: linked and near-duplicate records share a fold; framework: leave one out; time: per repository, the
# newest 20% tested by a model fitted on the older records (how the App lives)
FoldBy = Literal["groups", "framework", "time"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Task(_Strict):
    """One benchmark definition file. Paths are relative to the gold data directory."""

    name: str
    version: int
    description: str = ""
    datasets: tuple[str, ...] = Field(min_length=1)
    extra_cases: tuple[str, ...] | None = None
    train_on: tuple[str, ...] = ()
    folds: int = Field(default=5, ge=2)
    repeats: int = Field(default=1, ge=1)  # repeated CV: repetition r draws its folds with seed + r
    pool: bool = False  # cross-validate the datasets together (folds span files; results also per file)
    fold_by: FoldBy = "groups"
    seed: int = 0
    predictors: tuple[str, ...] = BASELINE_PREDICTORS
    baseline: str = DEFAULT_BASELINE  # the predictor the paired table compares every other one with
    llm_when_configured: bool = True
    text: Text = "opened"  # test records predicted from the opening post (as the App sees them) or the thread

    @field_validator("predictors")
    @classmethod
    def _known_predictors(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [name for name in value if name not in predictor_names()]
        if unknown:
            raise ValueError(f"unknown predictors {unknown}; known: {predictor_names()}")
        return value

    @field_validator("baseline")
    @classmethod
    def _known_baseline(cls, value: str) -> str:
        if value not in predictor_names():
            raise ValueError(f"unknown predictor {value!r}; known: {predictor_names()}")
        return value


class RunConfig(_Strict):
    """What one `run` does, with every path resolved; recorded verbatim in results.json."""

    task: str | None = None
    task_version: int | None = None
    overrides: tuple[str, ...] = ()  # fields of the task replaced on the command line
    datasets: tuple[Path, ...] = Field(min_length=1)
    extra_cases: tuple[Path, ...] | None = None  # None: DEFAULT_EXTRA_CASES applies
    train_on: tuple[Path, ...] = ()
    folds: int = Field(default=5, ge=2)
    repeats: int = Field(default=1, ge=1)
    pool: bool = False
    fold_by: FoldBy = "groups"
    seed: int = 0
    predictors: tuple[str, ...] = BASELINE_PREDICTORS
    near_duplicate_cosine: float = NEAR_DUPLICATE_COSINE
    bootstrap_resamples: int = Field(default=BOOTSTRAP_RESAMPLES, ge=100)
    fit_cache: bool = True
    baseline: str = DEFAULT_BASELINE  # the paired table compares every other predictor with it
    # False: no calibration cross-validation (a sixth of the fitting): accuracy, macro-F1 and the paired
    # table are unchanged, confidences are uncalibrated, so coverage, ECE and Brier mean nothing.
    calibrate: bool = True
    # opened: every test record is predicted from its opening post, dated by its header, and records without one
    # are not scored (they still train); thread: from the whole window, an upper bound on what the App can do.
    text: Text = "opened"
    # What the case bases learn from (`Settings.case_text`): None keeps the setting (DDL_TRIAGE_CASE_TEXT).
    train_text: Text | None = None

    @property
    def mode(self) -> str:
        return "transfer" if self.train_on else "cv"

    @property
    def evaluated_sets(self) -> list[tuple[Path, ...]]:
        """The test populations: all datasets together when pooled, else each on its own."""
        return [self.datasets] if self.pool and self.mode == "cv" else [(d,) for d in self.datasets]

    def extra_cases_for_all(self, datasets: tuple[Path, ...]) -> tuple[tuple[Path, ...], str]:
        """The extra case-base files of a (pooled) test population, never one of its own files."""
        found: dict[Path, None] = {}
        rules = []
        for dataset in datasets:
            paths, rule = self.extra_cases_for(dataset)
            found.update(dict.fromkeys(p for p in paths if p not in datasets))
            rules.append(rule)
        return tuple(found), "; ".join(dict.fromkeys(rules))

    def extra_cases_for(self, dataset: Path) -> tuple[tuple[Path, ...], str]:
        """The extra case-base files for a dataset and the rule that chose them (said in the report)."""
        if self.extra_cases is not None:
            return self.extra_cases, "given"
        if self.mode == "cv" and dataset.name in DEFAULT_EXTRA_CASES:
            found = tuple(dataset.parent / n for n in DEFAULT_EXTRA_CASES[dataset.name]
                          if (dataset.parent / n).is_file())
            return found, f"default for {dataset.name}: {', '.join(p.name for p in found) or 'none found'}"
        return (), "none"


def default_predictors(llm_configured: bool) -> tuple[str, ...]:
    return BASELINE_PREDICTORS + ((LLM_PREDICTOR,) if llm_configured else ())


def task_files() -> list[Path]:
    return sorted(TASKS_DIR.glob("*.yaml"))


def load_task_file(path: Path) -> Task:
    """Load and validate one definition; a problem names the file and the field."""
    task = load_yaml_model(path, Task, "benchmark definition")
    if task.name != path.stem:
        raise ConfigError(f"{path}: name {task.name!r} must match the file name {path.stem!r} (field 'name')")
    return task


def load_task(name: str) -> Task:
    """A definition by name (`ddl-dev-cv`) or by path to a YAML file."""
    path = Path(name) if name.endswith((".yaml", ".yml")) else TASKS_DIR / f"{name}.yaml"
    if not path.is_file():
        known = [p.stem for p in task_files()]
        raise ConfigError(f"no benchmark definition {name!r}; known: {known} (python -m eval ls)")
    return load_task_file(path)


def task_config(task: Task, data_dir: Path | None, llm_configured: bool) -> RunConfig:
    """The run a definition describes, its paths resolved against the gold data directory."""
    if data_dir is None:
        raise ConfigError(f"benchmark {task.name!r} names files of the gold data directory: set "
                          "DDL_TRIAGE_DATA_DIR (the folder of ddl-dev.jsonl)")

    def resolve(names: tuple[str, ...]) -> tuple[Path, ...]:
        return tuple(data_dir / n for n in names)

    predictors = task.predictors
    if llm_configured and task.llm_when_configured and LLM_PREDICTOR not in predictors:
        predictors = (*predictors, LLM_PREDICTOR)
    return RunConfig(task=task.name, task_version=task.version, datasets=resolve(task.datasets),
                     extra_cases=None if task.extra_cases is None else resolve(task.extra_cases),
                     train_on=resolve(task.train_on), folds=task.folds, repeats=task.repeats, pool=task.pool,
                     fold_by=task.fold_by, seed=task.seed, predictors=predictors, text=task.text,
                     baseline=task.baseline)
