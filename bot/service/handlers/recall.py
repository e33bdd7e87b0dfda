"""What the triage job asks of the repository memory: the result with the repository's labelled memory
blended in, its related issues, the pack neighbours' titles, and the repository's own label suggestions."""

from __future__ import annotations

from dataclasses import dataclass

from bot.core.domain import TriageResult
from bot.deciding.repo_config import RepoConfig
from bot.memory.overrides import blend, corrected_examples, labelled_examples
from bot.memory.queries import related_issues, repo_label_suggestions, with_titles
from bot.reading.normalise import NormalisedIssue
from bot.service.errors import NotFound, PermanentGitHubError
from bot.service.github.client import InstallationClient
from bot.service.handlers.context import JobContext


@dataclass(frozen=True)
class Recalled:
    result: TriageResult
    repo_labels: list[tuple[str, float]]  # the repository's own labels its label model suggests


def recall(ctx: JobContext, repo: str, number: int, normalised: NormalisedIssue, result: TriageResult,
           config: RepoConfig) -> Recalled:
    """The result with this repository's labelled memory blended in, its related issues, and the pack
    neighbours' titles and states; and the repository's own labels suggested for the issue (as the engine
    read it: `normalised`)."""
    memory = ctx.state.memory
    settings = ctx.state.settings
    vector = ctx.engine.embedder.embed([normalised.text])[0]  # a cache hit: the engine embedded it
    examples = [*corrected_examples(ctx.engine.embedder, vector, ctx.state.store.feedback_cases(repo=repo), repo,
                                    number),
                *labelled_examples(memory.index, vector, repo, number, config)]
    result = blend(ctx.engine, result, examples)
    related = related_issues(memory, settings, repo, number, vector, normalised.signatures)
    lookup = ClientLookup(ctx.client) if ctx.client is not None else None
    result = with_titles(result, memory.store, lookup, settings.memory_title_ttl_s)
    return Recalled(result.model_copy(update={"related": related}),
                    repo_label_suggestions(memory, repo, vector))


class ClientLookup:
    """Title, type and state of an issue through the installation's client; a missing one is all None."""

    def __init__(self, client: InstallationClient) -> None:
        self.client = client

    def lookup(self, repo: str, number: int) -> tuple[str | None, str | None, str | None]:
        try:
            snapshot = self.client.read_issue(repo, number)
        except (NotFound, PermanentGitHubError):
            return None, None, None
        return snapshot.issue.title, "pull_request" if snapshot.is_pull_request else "issue", snapshot.state
