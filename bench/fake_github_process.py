"""The fake GitHub of the tests in its own process, for `bench/webhook_load.py` (so that its threads do not
share the load generator's interpreter). Prints its address and App key as one JSON line, writes the N
deliveries' payloads to a JSONL file, then prints the comment counts whenever they change."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fake_github import BOT_LOGIN, REPO, FakeGitHub, issue_payload


def main(count: int, payloads: Path) -> None:
    fake = FakeGitHub()
    with fake.running():
        fake.add_repo(REPO)
        with payloads.open("w", encoding="utf-8") as out:
            for number in range(1, count + 1):
                out.write(json.dumps(issue_payload(fake, number=number)) + "\n")
        print(json.dumps({"base_url": fake.base_url, "app_id": fake.app_id, "key": fake.private_key}), flush=True)
        last = None
        while True:
            per_issue: dict[int, int] = {}
            for comment in list(fake.comments.values()):
                if comment["user"]["login"] == BOT_LOGIN:
                    per_issue[comment["_number"]] = per_issue.get(comment["_number"], 0) + 1
            now = (len(per_issue), sum(per_issue.values()), sum(1 for n in per_issue.values() if n > 1))
            if now != last:
                print(json.dumps({"t": time.time(), "issues": now[0], "comments": now[1], "doubled": now[2]}),
                      flush=True)
                last = now
            time.sleep(0.05)


if __name__ == "__main__":
    main(int(sys.argv[1]), Path(sys.argv[2]))
