"""Where a run failed and how, read off the failure's structure (bot/reading/tracebacks.py), as features per axis.

For **stage**, a maintainer looks at where the traceback stops: `initialize`, `_configure_*`, `from_pretrained`,
`load_checkpoint`, model construction and partitioning happen before the first step (data and model
preparation); `forward`, `backward`, `step`, `train_batch` during it (training); `init_process_group`, a
rendezvous or `initialize_model_parallel` at communication setup; a module import or an extension build at
environment setup. Each frame's function names a phase; the phases on the stack and the innermost one (the
closest to the failure) are features, with the deepest framework frame's function.
For **symptom**, the final exception's class, the kinds of the error signatures, the exit code and signal, the
signatures' digests that several training cases share (the same canonical message), and what the diagnostic
knowledge base (`taxonomy/diagnostics.yaml`) reads in the error's own words: the first symptom and the stage of
every entry that fires. Entries are columns through the labels they name, so an entry no training case fired
still speaks through its symptom.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

import numpy as np
from scipy import sparse

from bot.knowledge.diagnostics import load_diagnostics
from bot.reading.normalise import NormalisedIssue
from bot.reading.tracebacks import Failure

# Function names (whole name, case-sensitive) that place a frame in a phase of the run, checked in this order.
PHASES: dict[str, str] = {
    "communication": r"init_process_group|_?initiali[sz]e_(?:model_parallel|distributed)|new_group|create_group|"
                     r"\w*rendezvous\w*|init_distributed|setup_distributed|finish_mpu_init|_store_based_barrier|"
                     r"c10d::\w+::(?:connect|ProcessGroupNCCL\(?)|_create_c10d_store|init_device_mesh",
    "environment": r"<module>|_run_ninja_build|jit_load|_jit_compile|_write_ninja_file_and_compile|load_op|"
                   r"_load_library|build_extension|_load|load|hipify_extension|get_requires_for_build_wheel|"
                   r"build_wheel|run_setup|import_module",
    "inference": r"init_inference|generate|_generate|_apply_injection_policy|replace_transformer_layer|"
                 r"replace_module|_replace_module|_replace|inference_step|serve|put|_put",
    "training": r"forward|_forward|backward|_backward|step|_step|optimizer_step|train_batch|train_step|"
                r"training_step|forward_step|backward_step|forward_backward\w*|_inner_training_loop|train|fit|"
                r"_take_model_step|allreduce_gradients|reduce_gradients|_exec_\w+|_post_backward|"
                r"_pre_forward_module_hook|pre_sub_module_forward_function|post_sub_module_forward_function|"
                r"reduce_ready_partitions_and_remove_grads|average_tensor|evaluate|eval_batch|save_checkpoint|"
                r"_save_checkpoint|_do_optimizer_backward|clip_grad_norm_",
    "preparation": r"initialize|_configure\w*|from_pretrained|_?load_checkpoint\w*|load_state_dict|"
                   r"load_module_state_dict|_load_\w*state_dict\w*|__init__|\w*partition\w*|"
                   r"_convert_to_zero_parameters|setup_model_and_optimizer|get_model|model_provider|\w+_builder|"
                   r"build_\w*(?:data|dataset|model)\w*|\w*datasets_provider|get_megatron_optimizer|"
                   r"_?prepare\w*|convert\w*|get_fp32_state_dict\w*|\w*preprocess\w*|boost|Init|"
                   r"get_indexed_dataset\w*|add_param_group|build_model_gbuf_range_map",
}
_PHASE_OF = [(phase, re.compile(f"(?:{pattern})")) for phase, pattern in PHASES.items()]
# Without a traceback (most reports), the prose says where it failed in a few habitual phrases.
PROSE_PHASES: dict[str, str] = {
    # The taxonomy's words for data and model preparation: loading or partitioning data, building or wrapping the
    # model into the engine, loading pretrained weights, converting checkpoints before a run; and the config
    # checks `initialize` runs.
    "preparation": r"\bconver(?:t|ts|ting|ted|sion)\b|from_pretrained|\bload(?:ing)? (?:the |a |my )?(?:pretrained|"
                   r"checkpoint|model|weights|dataset|data)\b|\bpreprocess|\binitiali[sz](?:e|ing|ation)\b|"
                   r"deepspeed\.initialize|booster\.boost|\bbuild(?:ing)? (?:the |a )?(?:model|dataset|index)|"
                   r"zero\.Init|\b(?:creating|constructing|wrapping) (?:the |a )?model|\bbefore (?:the )?training|"
                   r"\bpartition(?:s|ing|ed)?\b|\bwhen loading\b|\bis not (?:equal|divisible)|\bdivisible by\b|"
                   r"\bbatch related parameters",
    "training": r"\bduring training\b|\bafter \d+ (?:steps|iterations|epochs)|\bat (?:step|iteration) \d+|"
                r"\btraining (?:loss|step)|\bloss (?:is|becomes|goes|spikes|diverges)|\bbackward pass|"
                r"\boptimizer step|\bresum(?:e|ing) training|\bin the middle of training",
}
_PROSE = {phase: re.compile(pattern, re.IGNORECASE) for phase, pattern in PROSE_PHASES.items()}
OWNED = ("deepspeed", "megatron", "colossalai", "torch", "transformers")
MIN_SHARED = 2  # a token that fewer training cases show is left out of the vocabulary


def frame_phase(function: str) -> str | None:
    """The phase of the run a frame's function places it in, or None."""
    name = function.split("(", 1)[0].strip()
    return next((phase for phase, rx in _PHASE_OF if rx.fullmatch(name)), None)


def failure_tokens(failure: Failure, digests: Sequence[str] = ()) -> list[str]:
    """The structure of one failure as tokens: phases on the stack, the innermost one, the deepest framework
    frame, the exception class, the exit code and signal, and the signature digests."""
    shown = failure.frames or failure.exception or failure.exit_code is not None or failure.signal or digests
    tokens: list[str] = ["failure"] if shown else []
    if failure.frames:
        tokens.append("frames")
        phases = [p for p in (frame_phase(f.function) for f in failure.frames if f.framework != "library") if p]
        tokens += [f"phase:{p}" for p in dict.fromkeys(phases)]
        if phases:
            tokens.append(f"innermost:{phases[-1]}")
        deepest = failure.deepest_framework_frame
        if deepest is not None and deepest.framework in OWNED:
            tokens.append(f"framework:{deepest.framework}")
            tokens.append(f"deepest:{deepest.function.split('(', 1)[0].strip()}")
    if failure.exception:
        tokens.append(f"exception:{failure.exception.rsplit('.', 1)[-1].rsplit('::', 1)[-1]}")
    if failure.exit_code is not None:
        tokens.append(f"exit:{failure.exit_code}")
    if failure.signal:
        tokens.append(f"signal:{failure.signal}")
    tokens += [f"digest:{d}" for d in digests]
    return tokens


def diagnosis_tokens(issue: NormalisedIssue) -> list[str]:
    """The labels the shipped knowledge base's entries name for the failures it recognises in the issue (the
    first symptom of each, its stage where the error establishes one), whatever kind of report it is."""
    tokens: list[str] = []
    for entry, _ in load_diagnostics().fired(issue.title, issue.body, issue.environment.framework):
        tokens += [f"diagnosis-symptom:{s}" for s in entry.symptoms[:1]]
        tokens += [f"diagnosis-stage:{entry.stage}"] if entry.stage else []
    return list(dict.fromkeys(tokens))


def issue_tokens(issue: NormalisedIssue) -> list[str]:
    """The failure's tokens, the kinds of its signatures, the phases its prose names, and the diagnoses' labels."""
    prose = [f"prose:{phase}" for phase, rx in _PROSE.items() if rx.search(issue.text)]
    return (failure_tokens(issue.failure, issue.digests) + [f"signature:{s.kind}" for s in issue.signatures] + prose
            + diagnosis_tokens(issue))


class StructureVocabulary:
    """The failure tokens that at least MIN_SHARED training cases show, as 0/1 columns."""

    def __init__(self, terms: Sequence[str] = ()) -> None:
        self.terms = list(terms)
        self._column = {t: i for i, t in enumerate(self.terms)}

    @classmethod
    def fit(cls, issues: Sequence[NormalisedIssue]) -> StructureVocabulary:
        counts = Counter(t for issue in issues for t in set(issue_tokens(issue)))
        # A column that never fires when nothing is shared: the view then predicts its priors, never fails.
        return cls(sorted(t for t, n in counts.items() if n >= MIN_SHARED) or ["(nothing shared)"])

    def transform(self, issues: Sequence[NormalisedIssue]) -> sparse.csr_matrix:
        rows, cols = [], []
        for row, issue in enumerate(issues):
            for col in sorted({self._column[t] for t in issue_tokens(issue) if t in self._column}):
                rows.append(row)
                cols.append(col)
        data = np.ones(len(rows), dtype=np.float32)
        return sparse.csr_matrix((data, (rows, cols)), shape=(len(issues), len(self.terms)))
