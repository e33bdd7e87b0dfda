"""Every shell command shown on the install and shadow-mode pages of the documentation, run as a reader runs it.

Each fenced `bash` block of `docs/install.md` and `docs/shadow-mode.md` runs with bash in the repository root,
rewritten only where the test machine must differ from the reader's: `.venv/` is the virtual environment running
the tests (in CI, the `.venv` that the README's test command made, so the venv commands find everything in
place: they are checked, not timed), the state directory and database are fresh ones, the service listens on a
free port instead of 8000, and its worker runs at niceness 0 (the shared test machine can starve a niced worker
for minutes). Nothing else of the text is changed: a command that breaks on the page breaks here.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bot.core.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
PAGES = ("install.md", "shadow-mode.md")
FENCE = re.compile(r"^```bash\n(.*?)^```", re.S | re.M)


def bash_blocks(page: str) -> list[str]:
    return FENCE.findall((ROOT / "docs" / page).read_text(encoding="utf-8"))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def for_this_machine(block: str, port: int) -> str:
    """The block with the test machine's venv and port; every other character as the page shows it."""
    venv = str(Path(sys.prefix))
    text = block.replace(" .venv ", f" {venv} ").replace(".venv/", f"{venv}/")
    text = text.replace("ddl-triage serve", f"ddl-triage serve --port {port}")
    text = text.replace("ddl-triage replay", f"ddl-triage replay --url http://127.0.0.1:{port}/webhook")
    text = text.replace("ddl-triage decisions", f"ddl-triage decisions --url http://127.0.0.1:{port}")
    return text.replace("localhost:8000", f"localhost:{port}").replace("127.0.0.1:8000", f"127.0.0.1:{port}")


class Ran(subprocess.CompletedProcess[str]):
    port: int
    group: int  # the process group of the block: the service it starts runs in it


def run_block(block: str, settings: Settings, tmp_path: Path, timeout_s: float = 900) -> Ran:
    """The block run by bash in its own process group; whatever of it is still running afterwards is killed."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DDL_TRIAGE_")} | {
        "DDL_TRIAGE_STATE_DIR": str(tmp_path / "state"), "HF_HUB_OFFLINE": "1",
        "DDL_TRIAGE_DATABASE_URL": f"sqlite:///{tmp_path / 'docs.sqlite3'}",
        # On the shared test machine a worker at the default niceness 19 can starve for minutes behind other jobs.
        "DDL_TRIAGE_WORKER_NICENESS": "0"}
    # The embedding cache of the test session, so that the triage on the page embeds only its own text.
    (tmp_path / "state" / "cache").mkdir(parents=True)
    cached = settings.cache_dir / "embeddings.sqlite3"
    if cached.is_file():
        (tmp_path / "state" / "cache" / "embeddings.sqlite3").write_bytes(cached.read_bytes())
    script = "set -euo pipefail\n" + for_this_machine(block, port)
    process = subprocess.Popen(["bash", "-c", script], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    ran = Ran(process.args, process.returncode, stdout, stderr)
    ran.port, ran.group = port, process.pid
    return ran


def test_the_pages_show_commands_and_the_rewrite_keeps_them_whole() -> None:
    blocks = {page: bash_blocks(page) for page in PAGES}
    assert len(blocks["install.md"]) >= 3 and len(blocks["shadow-mode.md"]) >= 1
    rewritten = for_this_machine(blocks["shadow-mode.md"][0], 18123)
    venv = f"{Path(sys.prefix)}/"
    assert rewritten.replace(venv, "").count(".venv/") == 0 and venv in rewritten
    assert "8000" not in rewritten and "serve --port 18123" in rewritten


@pytest.mark.parametrize("index", range(len(bash_blocks("install.md"))))
def test_every_install_command_runs(index: int, settings: Settings, tmp_path: Path) -> None:
    block = bash_blocks("install.md")[index]
    done = run_block(block, settings, tmp_path)
    assert done.returncode == 0, f"{block}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    if "ddl-triage triage" in block:  # the page's sample report gets a comment, not silence
        assert "<!-- ddl-triage v1" in done.stdout and "**Next step:**" in done.stdout, done.stdout + done.stderr


def test_the_shadow_mode_walk_through_prints_the_comment_and_stops_the_service(settings: Settings,
                                                                               tmp_path: Path) -> None:
    [block] = bash_blocks("shadow-mode.md")
    done = run_block(block, settings, tmp_path)
    try:
        assert done.returncode == 0, f"--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
        # `replay` printed the comment as markdown (not a JSON string), and `decisions` the same comment again.
        assert done.stdout.count("<!-- ddl-triage v1") == 2, done.stdout
        assert '\\n' not in done.stdout and "## example-org/fastdist#7: stored (shadow mode)" in done.stdout
        assert "waiting for the decision" in done.stderr
        # `kill $!` stopped the service: its port closes (polled; the web process and its worker exit).
        deadline = time.monotonic() + 60
        while _listening(done.port):
            assert time.monotonic() < deadline, "the service still listens after `kill $!`"
            time.sleep(0.2)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(done.group, signal.SIGKILL)  # a service the block failed to stop
    log = ROOT / "serve.log"  # the page's own log file, in the clone as a reader's would be (git ignores it)
    lines = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.startswith("{")]
    assert any(line.get("msg", "").startswith("job done") for line in lines)
    log.unlink()


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_the_app_s_private_key_and_credentials_are_never_committed(tmp_path: Path) -> None:
    """The registration steps write `app.pem`, `app-credentials.json` and `register-app.html` into the clone."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    for name in ("app.pem", "secrets/app.pem", "my-app.2026-11-27.private-key.pem", "app-credentials.json",
                 "register-app.html", "serve.log"):
        done = subprocess.run(["git", "check-ignore", "-q", name], cwd=ROOT)
        assert done.returncode == 0, f"{name} is not ignored by .gitignore"


ANY_FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)


def shown_examples() -> list[tuple[str, str, str, str]]:
    """(file, command, language, output) for each `ddl-triage triage` command shown with its output after it."""
    found = []
    for path in (ROOT / "README.md", ROOT / "docs" / "comment.md"):
        blocks = ANY_FENCE.findall(path.read_text(encoding="utf-8"))
        for (lang, command), (out_lang, output) in itertools.pairwise(blocks):
            shown = out_lang in ("markdown", "text")
            if lang == "bash" and command.startswith(".venv/bin/ddl-triage triage") and shown:
                found.append((path.name, command, out_lang, output))
    return found


@pytest.mark.parametrize(("page", "command", "lang", "output"), shown_examples(),
                         ids=[f"{e[0]}-{i}" for i, e in enumerate(shown_examples())])
def test_every_comment_shown_is_what_the_code_prints(page: str, command: str, lang: str, output: str,
                                                      settings: Settings, tmp_path: Path) -> None:
    """The README's comment and the comment page's examples, run again: the markdown must be exactly what they show
    (the comment on stdout; a silence, shown as text, on stderr)."""
    done = run_block(command, settings, tmp_path)
    assert done.returncode == 0, done.stderr
    printed = done.stdout if lang == "markdown" else done.stderr
    assert printed.strip() == output.strip(), f"{page} shows another comment than the code prints:\n{printed}"


def test_the_readme_and_comment_page_show_examples() -> None:
    pages = {page for page, *_ in shown_examples()}
    assert pages == {"README.md", "comment.md"} and len(shown_examples()) >= 5
