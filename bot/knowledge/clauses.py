"""Clauses of a knowledge-base text that hold only for some frameworks or only from (or before) a day.

    <only DeepSpeed>...</only>            shown on DeepSpeed's issues only (`<only DeepSpeed, Colossal-AI>`: either)
    <from 2023-03-03>...</from>           shown on issues opened that day or later (and on undated ones)
    <before 2023-03-03>...</before>       shown on issues opened before that day

One text then speaks each framework's own API, and names a release only once it has shipped, without a copy of the
whole text per framework or per date. The text without its `only` clauses is the general one, which an issue of
another or an unknown framework reads; each clause adds one framework's own flags to it. Clauses nest: a framework's
flag that came in a release (`<only Megatron-LM>... <from 2022-08-10>--timing-log-level</from></only>`), or an
upgrade inside a setting that itself came in a release; an `only` clause never holds another `only` clause (it would
be dead or redundant). Tags are read inside code spans too (no text needs one literally)."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator
from datetime import date, timedelta

# A clause with no clause inside it; rendering and checking take the innermost first, so an outer clause's body holds
# its inner clauses' results.
TAG = re.compile(r"<(/?)(only|from|before)\b([^<>]*)>")
CLAUSE = re.compile(r"<(only|from|before)\b([^<>]*)>((?:(?!</?(?:only|from|before)\b[^<>]*>).)*?)</\1>", re.DOTALL)
_GAP = "\x00"  # where a clause that does not hold was: the space around it is closed, the rest of the text kept
_ADJACENT_GAPS = re.compile(r"\x00(?: *\x00)+")
_EMPTY_PARENTHESES = re.compile(r" ?\( *\x00+ *\)")
_BEFORE_PUNCTUATION = re.compile(r" *\x00+ *(?=[,;.:)]|$)")
_AFTER_OPENING = re.compile(r"(?:(?<=\()|^) *\x00+ *")
_BETWEEN_SPACES = re.compile(r" +\x00+ +")
# What a removed clause must not leave behind: two spaces, a space before punctuation, doubled punctuation, "(," or
# ",)", or punctuation opening the text. Counted against the text with every clause kept, which may hold them in code.
_LEFT_BEHIND = re.compile(r"  | [,;.:)?!\]]|[,;:][,;.:]|\(,|,\)|^[,;.:]")
_ISO_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


def _names(argument: str) -> list[str]:
    return [name.strip() for name in argument.split(",")]


def _day(argument: str) -> date:
    try:
        if _ISO_DAY.fullmatch(argument.strip()):
            return date.fromisoformat(argument.strip())
    except ValueError:
        pass
    raise ValueError(f"<{argument}>: a clause's day is YYYY-MM-DD")


def _structure(text: str) -> list[tuple[str, str, str, list[tuple[str, str]]]]:
    """Every clause of `text` as (kind, argument, body with the inner clauses' tags, the clauses around it), innermost
    first; ValueError for a tag without its pair or an `only` clause inside another."""
    found: list[tuple[str, str, str, list[tuple[str, str]]]] = []
    opened: list[tuple[str, str, int]] = []  # kind, argument, where its body starts
    for tag in TAG.finditer(text):
        closing, kind, argument = tag.groups()
        if not closing:
            if kind == "only" and any(outer == "only" for outer, _, _ in opened):
                raise ValueError(f"<{kind}{argument}>: inside another `only` clause, where it is dead (another "
                                 "framework) or redundant (the same one)")
            opened.append((kind, argument.strip(), tag.end()))
        elif not opened or opened[-1][0] != kind or argument:
            raise ValueError(f"{tag.group(0)!r}: a clause tag without its pair (`<only X>...</only>`, "
                             "`<from DAY>...</from>`, `<before DAY>...</before>`)")
        else:
            kind, argument, start = opened.pop()
            found.append((kind, argument, text[start:tag.start()], [(k, a) for k, a, _ in opened]))
    if opened:
        kind, argument, _ = opened[-1]
        raise ValueError(f"'<{kind} {argument}>': a clause tag without its pair (`<only X>...</only>`, "
                         "`<from DAY>...</from>`, `<before DAY>...</before>`)")
    return found


def check(text: str, frameworks: Collection[str], *, general: bool = True) -> str:
    """`text` unchanged when its clauses are well formed and name only `frameworks`; else ValueError saying what.
    `general`: the text is also read by issues of other or unknown frameworks (not one framework's own text)."""
    if _GAP in text:
        raise ValueError("a NUL character: remove it")
    structure = _structure(text)
    for kind, argument, body, _ in structure:
        if not argument:
            raise ValueError(f"<{kind}>: a clause names its framework or day (`<only X>`, `<from YYYY-MM-DD>`)")
        if not TAG.sub("", body).strip():
            raise ValueError(f"<{kind} {argument}>: an empty clause")
        if kind == "only" and (unknown := [name for name in _names(argument) if name not in frameworks]):
            raise ValueError(f"<only {argument}>: {unknown} not among the frameworks {sorted(frameworks)}")
        if kind != "only":
            _day(argument)
    every = list(occasions(text, frameworks, general=general))
    for kind, argument, _, around in structure:
        if not any(all(_holds(k, a, framework, opened) for k, a in [*around, (kind, argument)])
                   for framework, opened in every):
            raise ValueError(f"<{kind} {argument}>: never shown, for no framework or day holds it together with the "
                             f"clauses around it ({', '.join(f'<{k} {a}>' for k, a in around)})")
    kept = len(_LEFT_BEHIND.findall(TAG.sub("", text)))
    for framework, opened in every:
        rendered = render(text, framework, opened)  # no tag is left: TAG and CLAUSE read a tag alike
        if not rendered:
            raise ValueError(f"says nothing for framework {framework} on {opened}: every part of it is a clause that "
                             "does not hold then")
        if len(_LEFT_BEHIND.findall(rendered)) > kept:
            raise ValueError(f"for framework {framework} on {opened} it reads {rendered!r}: a removed clause leaves "
                             "stray spaces or punctuation; move them inside the clause")
    return text


def only_frameworks(text: str) -> set[str]:
    """The frameworks that `only` clauses of `text` name."""
    return {name for tag in TAG.finditer(text) if tag.group(2) == "only" and not tag.group(1)
            for name in _names(tag.group(3))}


def occasions(text: str, frameworks: Collection[str], *,
              general: bool = True) -> Iterator[tuple[str | None, date | None]]:
    """Every framework and day that reads `text` differently: each framework (and, for a `general` text, an unknown
    one), undated and on either side of each day a clause names."""
    days: list[date | None] = [None]
    for tag in TAG.finditer(text):
        if tag.group(2) != "only" and not tag.group(1):
            day = _day(tag.group(3))
            days += [day - timedelta(days=1), day]
    for framework in [None, *sorted(frameworks)] if general else sorted(frameworks):
        for opened in dict.fromkeys(days):
            yield framework, opened


def _holds(kind: str, argument: str, framework: str | None, opened: date | None) -> bool:
    if kind == "only":
        return framework is not None and framework in _names(argument)
    if kind == "from":
        return opened is None or opened >= _day(argument)
    return opened is not None and opened < _day(argument)


def render(text: str, framework: str | None, opened: date | None) -> str:
    """`text` as an issue of `framework` opened on `opened` reads it: the clauses that hold kept (without their tags),
    the others removed with the space they leave."""
    if "</" not in text:
        return text

    def holds(match: re.Match[str]) -> str:
        kind, argument, body = match.groups()
        return body if _holds(kind, argument, framework, opened) else _GAP

    rendered = text
    while (inner := CLAUSE.sub(holds, rendered)) != rendered:  # innermost first, one level a round
        rendered = inner
    rendered = _ADJACENT_GAPS.sub(_GAP, rendered)
    for gap, closed in ((_EMPTY_PARENTHESES, ""), (_BEFORE_PUNCTUATION, ""), (_AFTER_OPENING, ""),
                        (_BETWEEN_SPACES, " ")):
        rendered = gap.sub(closed, rendered)
    return rendered.replace(_GAP, "").strip()
