"""`X-Hub-Signature-256` and the App's credentials: verified, never guessed."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr

from bot.core.errors import ConfigError
from bot.core.settings import Settings
from bot.service.github.credentials import check_credentials, resolve_private_key
from bot.service.web.signature import sign_body, verify_signature
from tests.fake_github import app_private_key


def test_a_signature_verifies_only_the_exact_body_and_secret() -> None:
    body = b'{"action": "opened"}'
    header = sign_body("s3cret", body)
    assert header.startswith("sha256=") and verify_signature("s3cret", body, header)
    assert not verify_signature("s3cret", body + b" ", header)
    assert not verify_signature("other", body, header)
    for bad in (None, "", "sha1=abc", "sha256=", "sha256=zz", "sha256=\u00e9"):
        assert not verify_signature("s3cret", body, bad)


def test_github_documented_example_signature() -> None:
    # The example of GitHub's "Validating webhook deliveries" page.
    assert sign_body("It's a Secret to Everybody", b"Hello, World!") == (
        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17")


def test_a_missing_secret_fails_at_start_up_naming_the_variable(settings: Settings) -> None:
    with pytest.raises(ConfigError, match="DDL_TRIAGE_WEBHOOK_SECRET"):
        check_credentials(settings.model_copy(update={"github_app_id": 1,
                                                       "github_private_key": SecretStr(app_private_key())}))
    with pytest.raises(ConfigError, match="DDL_TRIAGE_GITHUB_APP_ID"):
        check_credentials(settings.model_copy(update={"webhook_secret": SecretStr("x")}))


def test_shadow_mode_needs_no_credentials(settings: Settings) -> None:
    assert check_credentials(settings.model_copy(update={"shadow": True})) is None


def test_the_private_key_is_pem_text_or_a_path_to_a_pem_file(tmp_path: Path) -> None:
    pem = app_private_key()
    assert resolve_private_key(pem).strip() == pem.strip()
    assert resolve_private_key(pem.replace("\n", "\\n")).strip() == pem.strip()
    path = tmp_path / "app.pem"
    path.write_text(pem)
    assert resolve_private_key(str(path)) == pem
    with pytest.raises(ConfigError, match="DDL_TRIAGE_GITHUB_PRIVATE_KEY"):
        resolve_private_key(str(tmp_path / "missing.pem"))
    (tmp_path / "not-a-key.txt").write_text("hello")
    with pytest.raises(ConfigError, match="no PEM private key"):
        resolve_private_key(str(tmp_path / "not-a-key.txt"))
