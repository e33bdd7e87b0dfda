"""Scoring the comments: what a maintainer would see, as figures.

Asks are checked against literal evidence in the issue text: plain substrings that unmistakably show a fact,
chosen apart from the taxonomy's `present` patterns that decide an ask, so a blind spot of those patterns
shows up here instead of hiding behind itself. Links are checked with the team's definition of a link that
GitHub turns into a cross-reference (the same pattern as /work/shared/tools/comment_metrics.py).
"""

from __future__ import annotations

import math
import re
import statistics
from datetime import datetime
from typing import Any

from bot.comment.compose import CommentPlan
from bot.comment.links import linked_in
from bot.comment.policy import REASONS
from bot.core.domain import Case, TriageResult

UNSCORED_SYMPTOMS = (None, "unknown", "none")
# Literal evidence that the text shows a fact (lower-case substrings), independent of taxonomy `present`.
LITERAL_EVIDENCE: dict[str, tuple[str, ...]] = {
    "torch_version": ("torch version", "pytorch version", "torch==", "torch: 1.", "torch: 2.", "torch 1.", "torch 2.",
                      "pytorch 1.", "pytorch 2.", "torch.__version__", "+cu1", "torch install path"),
    "cuda_version": ("cuda version", "cuda 11", "cuda 12", "cuda: 11", "cuda: 12", "cuda=1", "cuda11", "cuda12",
                     "+cu1", "release 11.", "release 12.", "nvcc version"),
    "framework_version": ("deepspeed version", "deepspeed==", "deepspeed 0.", "deepspeed: 0.", "deepspeed info",
                          "colossalai==", "colossalai version", "colossal-ai version", "colossalai: 0.",
                          "colossalai 0.",
                          "megatron-core", "megatron core", "mcore", "git rev-parse", "commit id", "latest version",
                          "latest release"),  # not "main branch": Colossal-AI's template has a checkbox with it
    "te_version": ("transformer-engine==", "transformer_engine==", "transformer engine version", "te version",
                   "nvcr.io/nvidia/pytorch", "transformer-engine 1.", "transformer_engine 1.", "transformer-engine 2.",
                   "transformer_engine 2."),
    "versions": ("deepspeed general environment info", "op name ....", "installation report", "torch install path"),
    "launch_command": ("torchrun", "deepspeed --", "mpirun", "srun ", "--nproc_per_node", "--nproc-per-node",
                       "gpus_per_node", "colossalai run", "accelerate launch", "torch.distributed.launch",
                       "torch.distributed.run", "sbatch", "--num_gpus", "--hostfile", "pretrain_gpt.py"),
    "nccl_debug": ("nccl info", "nccl_debug", "nccl warn"),
    "traceback": ("traceback (most recent call last)", "error:", "exception:", "core dumped", "segmentation fault"),
    "compiler_error": ("error:", "nvcc fatal", "failed:", "build stopped", "subprocess-exited-with-error",
                       "compilation terminated"),
    "memory_setup": ("zero_optimization", "micro_batch", "micro-batch", "zero stage", "zero-3", "zero3", "stage 3",
                     "--tensor-model-parallel-size", "--micro-batch-size", "batch_size", "seq_length", "80gb", "40gb"),
    "precision_setup": ("bf16", "fp16", "fp8", "bfloat16", "float16", "learning rate", "\"lr\"", "lr="),
    "hardware": ("a100", "h100", "v100", "h800", "a800", "4090", "3090", "gpus", "nodes", "nvlink", "infiniband",
                 "nvidia-smi", "rtx", "mi250", "mi300", "ascend", "gpus_per_node"),
}
# `versions` is shown when each of its parts is; Megatron-LM's are the commit and the Transformer Engine version.
COMPOSITE_EVIDENCE = {"versions": ("torch_version", "cuda_version", "framework_version")}
MEGATRON_COMPOSITE = {"versions": ("framework_version", "te_version")}
PING = re.compile(r"(?<![\w.])github\.com/[\w.-]+/[\w.-]+/(?:issues|pull)/\d+"
                  r"|(?<![`\w/.-])[\w.-]+/[\w.-]+#\d+(?![`\w])")


def text_shows(fact: str, text: str, repo: str | None = None) -> bool:
    """Literal evidence of `fact` in `text` (lower-cased), or of every part of a composite fact."""
    lowered = text.lower()
    if any(s in lowered for s in LITERAL_EVIDENCE.get(fact, ())):
        return True
    composite = MEGATRON_COMPOSITE if "megatron" in (repo or "").lower() else COMPOSITE_EVIDENCE
    parts = composite.get(fact, ())
    return bool(parts) and all(text_shows(p, text, repo) for p in parts)


def pinging_links(markdown: str) -> int:
    """Links GitHub would turn into a cross-reference: a plain issue URL or owner/repo#N outside code and
    outside a link's text (a link's text is not autolinked again, so only its target is kept)."""
    md = re.sub(r"<!--.*?-->", "", markdown, flags=re.S)
    md = re.sub(r"`[^`]*`", "", md)
    md = re.sub(r"\[([^\]]*)\]\(([^)\s]*)[^)]*\)", r" \2 ", md)
    return len(PING.findall(md))


def score_comment(case: Case, result: TriageResult, plan: CommentPlan, markdown: str | None,
                  opened: dict[str, datetime | None] | None = None) -> dict[str, Any]:
    """One issue's comment as figures (what the table adds up). `opened`: each known case's opening date, to
    count links to issues opened at or after this one (a precedent's own date is used first)."""
    text = f"{case.title}\n{case.body}"
    links = [*plan.precedents, *plan.asked_before] if markdown else []
    dates = opened or {}
    later = [p.case_id for p in links if case.created_at and (when := p.created_at or dates.get(p.case_id))
             and when >= case.created_at]
    chars = len(re.sub(r"<!--.*?-->", "", markdown, flags=re.S).strip()) if markdown else 0
    return {
        "id": case.id, "repo": case.repo, "gold_kind": case.labels.get("kind"),
        "gold_symptom": case.labels.get("symptom"), "posted": markdown is not None, "chars": chars,
        "comment": markdown, "not_sure": markdown.lower().count("not sure") if markdown else 0,
        "rows": [row.axis for row in plan.rows] if markdown and plan.show_labels else [],  # the label lines in words
        "asks": plan.asks if markdown else [],
        "asks_shown": [f for f in plan.asks if text_shows(f, text, case.repo)] if markdown else [],
        "predicted_symptom": result.predictions["symptom"].top[0][0], "shown_symptom": result.label("symptom"),
        "symptom_confidence": round(result.predictions["symptom"].confidence, 4),
        "neighbours": [{"id": n.id, "score": round(n.score, 4), "symptom": n.labels.get("symptom"),
                        "signature": bool(n.signature)} for n in result.neighbours[:5]],
        "precedents": [{"id": p.case_id, "own": p.own, "symptom": p.label("symptom"), "signature": bool(p.signature),
                        "score": round(p.score, 4) if p.score is not None else None}
                       for p in plan.precedents] if markdown else [],
        "diagnosis": ({"id": plan.diagnosis.id, "symptoms": plan.diagnosis.symptoms}
                      if markdown and plan.diagnosis else None),
        "pinging_links": pinging_links(markdown) if markdown else 0,
        "reasons": list(plan.reasons) if markdown else [],
        "labels_and_asks_only": markdown is not None and not plan.reasons,
        "links_after": later,
        "links_other_repo_unshared": [p.case_id for p in links if not p.own and not p.signature],
        "links_in_post": [p.case_id for p in links if p.case_id.lower() in linked_in(text, case.repo)],
    }


def summarise(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """The table's figures over every commented issue."""
    posted = [s for s in samples if s["posted"]]
    asks = [len(s["asks"]) for s in posted]
    return {
        "issues": len(samples), "posted": len(posted), "posted_share": _share(len(posted), len(samples)),
        "median_chars": statistics.median([s["chars"] for s in posted]) if posted else 0,
        "not_sure_rows": sum(s["not_sure"] for s in posted),
        "rows_mean": _mean([len(s["rows"]) for s in posted]), "rows_max": max((len(s["rows"]) for s in posted),
                                                                              default=0),
        "asks_mean": _mean(asks), "asks_max": max(asks, default=0), "asks": sum(asks),
        "asks_for_shown_facts": sum(len(s["asks_shown"]) for s in posted),
        "precedent": _links(samples, own=True), "evidence": _links(samples, own=False),
        "links": _links(samples, own=None), "diagnosis": _diagnoses(samples),
        "pinging_links": sum(s["pinging_links"] for s in posted),
        "posted_because": _because(posted),
        "reasons": {reason: {"issues": (n := sum(reason in s["reasons"] for s in posted)),
                             "share": _share(n, len(samples))} for reason in REASONS},
        "labels_and_asks_only": sum(s["labels_and_asks_only"] for s in posted),
        "links_after": sum(len(s["links_after"]) for s in posted),
        "links_other_repo_unshared": sum(len(s["links_other_repo_unshared"]) for s in posted),
        "links_in_post": sum(len(s["links_in_post"]) for s in posted),
    }


def _links(samples: list[dict[str, Any]], own: bool | None) -> dict[str, Any]:
    """Coverage (issues whose comment shows such a link) and gold-symptom precision of the links."""
    covered, scored, same = 0, 0, 0
    for s in samples:
        links = [p for p in s["precedents"] if own is None or p["own"] == own]
        covered += bool(links)
        if s["gold_symptom"] in UNSCORED_SYMPTOMS:
            continue
        for p in links:
            if p["symptom"]:  # a case without a gold symptom cannot be scored (the team's comment_metrics rule)
                scored += 1
                same += p["symptom"] == s["gold_symptom"]
    return {"issues": covered, "coverage": _share(covered, len(samples)), "links": scored, "same_symptom": same,
            "precision": _share(same, scored), "interval": wilson(same, scored)}


def _diagnoses(samples: list[dict[str, Any]]) -> dict[str, Any]:
    shown = [s for s in samples if s["diagnosis"]]
    scored = [s for s in shown if s["gold_symptom"] not in UNSCORED_SYMPTOMS]
    hits = sum(s["gold_symptom"] in s["diagnosis"]["symptoms"] for s in scored)
    return {"issues": len(shown), "coverage": _share(len(shown), len(samples)), "scored": len(scored),
            "hits": hits, "precision": _share(hits, len(scored)), "interval": wilson(hits, len(scored))}


def _because(posted: list[dict[str, Any]]) -> dict[str, int]:
    """Why each posted comment was posted: its first reason (policy.REASONS order), or none (`comment: always`)."""
    out = {reason: 0 for reason in REASONS} | {"no reason": 0}
    for s in posted:
        out[s["reasons"][0] if s["reasons"] else "no reason"] += 1
    return out


def wilson(hits: int, n: int, z: float = 1.96) -> list[float] | None:
    """The 95% Wilson score interval of a proportion (None when nothing was scored)."""
    if n == 0:
        return None
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [round(centre - half, 3), round(centre + half, 3)]


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 3) if whole else None


def _mean(values: list[int]) -> float:
    return round(statistics.mean(values), 2) if values else 0.0


def table_markdown(results: dict[str, Any]) -> str:
    """The README's table, with the command that regenerates it."""
    s = results["summary"]

    def links(m: dict[str, Any]) -> str:
        ci = f" [{m['interval'][0]:.2f}, {m['interval'][1]:.2f}]" if m["interval"] else ""
        precision = "-" if m["precision"] is None else f"{m['precision']:.2f}{ci}"
        return f"{m['issues']} issues ({_pct(m['coverage'])}); {m['links']} links scored, precision {precision}"

    d = s["diagnosis"]
    d_precision = "-" if d["precision"] is None else f"{d['precision']:.2f}"
    rows = [
        ("issues commented on (pull requests never are)", f"{s['issues']}", ""),
        ("share posted", f"{s['posted']} ({_pct(s['posted_share'])})", ""),
        ("median posted comment (characters, marker excluded)", f"{s['median_chars']:.0f}", "<= 600"),
        ("\"not sure\" rows", f"{s['not_sure_rows']}", "0"),
        ("label lines in the text per posted comment (mean / max)", f"{s['rows_mean']:.2f} / {s['rows_max']}", ""),
        ("asks per posted comment (mean / max)", f"{s['asks_mean']:.2f} / {s['asks_max']}", "<= 2"),
        ("asks for a fact the text shows (literal evidence)", f"{s['asks_for_shown_facts']} of {s['asks']}", "0"),
        ("precedents: the repository's own issues", links(s["precedent"]), ">= 0.80"),
        ("evidence: labelled cases of other repositories", links(s["evidence"]), ">= 0.80"),
        ("diagnoses shown (precision: gold symptom among the entry's)",
         f"{d['issues']} issues ({_pct(d['coverage'])}); precision {d_precision} on {d['scored']}", ">= 0.80"),
        ("links in a cross-referencing form", f"{s['pinging_links']}", "0"),
        ("posted because of (first reason)", ", ".join(f"{k} {v}" for k, v in s["posted_because"].items()), ""),
        *[(f"issues with the reason {reason.replace('_', ' ')}", f"{m['issues']} ({_pct(m['share'])})", "")
          for reason, m in s["reasons"].items()],
        ("comments made of labels and asks only", f"{s['labels_and_asks_only']}", "0"),
        ("links to issues opened at or after the issue", f"{s['links_after']}", "0"),
        ("links to another repository without a shared signature", f"{s['links_other_repo_unshared']}", "0"),
        ("links the post already contains", f"{s['links_in_post']}", "0"),
    ]
    lines = ["| measure | value | target |", "|---|---|---|", *[f"| {a} | {b} | {c} |" for a, b, c in rows]]
    scope = (f"\n\nAs opened: {s['issues']} issues scored from their opening post; "
             f"{results.get('not_opened', 0)} windows without an opening post not scored; repository memory "
             f"{'on (gold threads opened before each issue)' if results.get('memory') else 'off'}.")
    return "\n".join(lines) + scope + f"\n\nRegenerate: `{results['command']}`\n"


def _pct(share: float | None) -> str:
    return "-" if share is None else f"{100 * share:.0f}%"
