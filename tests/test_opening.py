"""The opening post of a gold window, as `../shared/tools/opening.py` cuts it, and its date."""

from __future__ import annotations

from datetime import UTC, datetime

from bot.reading.opening import has_opening_post, opened_at, opened_no_later_than, opening_post

WINDOW = ("alice · description · 2024-03-02\nTraining hangs at step 10.\n\nalice · comment notes\n"
          "bob · comment · 2024-03-05\nSet NCCL_P2P_DISABLE=1.\ncarol · review · 2024-03-06\nLGTM\n")
MID_THREAD = "bob · comment · 2024-03-05\nSet NCCL_P2P_DISABLE=1.\ncarol · comment · 2024-03-04\nsame here\n"


def test_the_cut_ends_at_the_first_later_section_header() -> None:
    assert opening_post(WINDOW) == ("alice · description · 2024-03-02\nTraining hangs at step 10.\n\n"
                                    "alice · comment notes")


def test_a_body_without_later_sections_is_kept_whole() -> None:
    whole = "alice · description · 2024-03-02\nOOM at step 1"
    assert opening_post(whole) == whole
    assert opening_post("") == ""


def test_the_opening_date_comes_from_the_description_header() -> None:
    assert opened_at(WINDOW) == datetime(2024, 3, 2, tzinfo=UTC)
    assert has_opening_post(WINDOW)


def test_a_window_that_starts_mid_thread_has_no_opening_post_but_a_bound() -> None:
    assert not has_opening_post(MID_THREAD)
    assert opened_at(MID_THREAD) is None
    assert opened_no_later_than(MID_THREAD) == datetime(2024, 3, 4, tzinfo=UTC)
    assert opened_no_later_than("no headers at all") is None


def test_the_cut_agrees_with_the_shared_tool(gold_dir) -> None:  # type: ignore[no-untyped-def]
    import importlib.util
    import json

    spec = importlib.util.spec_from_file_location("shared_opening", gold_dir.parent.parent / "tools" / "opening.py")
    assert spec and spec.loader
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    with (gold_dir / "ddl-dev.jsonl").open(encoding="utf-8") as handle:
        bodies = [json.loads(line)["body"] or "" for line in handle]
    assert sum(has_opening_post(b) for b in bodies) > 200
    for body in bodies:
        assert opening_post(body) == tool.opening(body)
        day = tool.opened_at(body)
        assert (opened_at(body) is None) == (day is None)
        if day:
            assert opened_at(body) == datetime.fromisoformat(day).replace(tzinfo=UTC)


def test_a_batch_line_may_give_created_at_and_a_gold_case_gets_its_bound(tmp_path, taxonomy) -> None:  # type: ignore[no-untyped-def]
    import json

    from bot.knowledge.dataset import load_gold, read_issues

    batch = tmp_path / "batch.jsonl"
    batch.write_text(json.dumps({"id": "a", "title": "t", "body": "b", "created_at": "2024-03-02"}) + "\n"
                     + json.dumps({"id": "b", "title": "t", "body": "b"}) + "\n"
                     + json.dumps({"id": "c", "title": "t", "body": "b", "created_at": "last week"}) + "\n")
    errors: list[object] = []
    issues = list(read_issues(batch, errors.append))
    assert [i.created_at for i in issues] == [datetime(2024, 3, 2, tzinfo=UTC), None]
    assert len(errors) == 1 and ":3" in str(errors[0]) and "created_at" in str(errors[0])
    gold = tmp_path / "gold.jsonl"
    gold.write_text(json.dumps({"id": "r#1", "title": "t", "body": MID_THREAD, "labels": {}}) + "\n")
    assert load_gold(gold, taxonomy)[0].created_at == datetime(2024, 3, 4, tzinfo=UTC)
