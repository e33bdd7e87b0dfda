"""The service's errors: rejected deliveries (an HTTP status) and GitHub failures (whether to retry)."""

from __future__ import annotations

from bot.core.errors import TriageError


class ServiceError(TriageError):
    """Base of the webhook service's errors."""


class DeliveryRejected(ServiceError):
    """A webhook delivery that is refused; `status` is the HTTP answer, `outcome` the metrics label."""

    status = 400
    outcome = "invalid"


class SignatureError(DeliveryRejected):
    status = 401
    outcome = "bad_signature"


class PayloadTooLarge(DeliveryRejected):
    status = 413
    outcome = "too_large"


class StoreBusy(DeliveryRejected):
    """The database did not take the delivery in time: 503 with Retry-After; GitHub records a failed
    delivery, which the missed-delivery sweep asks GitHub to send again."""

    status = 503
    outcome = "unavailable"
    retry_after_s = 60


class MalformedPayload(DeliveryRejected):
    """The body is not a JSON object, or a required header is missing."""


class PayloadFieldError(DeliveryRejected):
    """A well-formed payload that lacks a field the service needs, or has it with the wrong type."""

    status = 422

    def __init__(self, field: str, problem: str = "is missing") -> None:
        super().__init__(f"payload field {field!r} {problem}")
        self.field = field


class GitHubError(ServiceError):
    """A call to GitHub's API failed; the subclass says whether and when to retry."""


class RateLimited(GitHubError):
    """GitHub asked us to slow down (403/429 with retry-after or an exhausted rate limit)."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class TransientGitHubError(GitHubError):
    """A 5xx answer or a network error: worth retrying with backoff."""


class PermanentGitHubError(GitHubError):
    """A 4xx answer that a retry will not change (missing permission, unknown repository)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class NotFound(PermanentGitHubError):
    """GitHub answered 404."""


class WriteDeferred(ServiceError):
    """A write to an installation is not due yet: the job is queued again for `slot` (a time), holding it."""

    def __init__(self, message: str, slot: float) -> None:
        super().__init__(message)
        self.slot = slot


class RetryLater(ServiceError):
    """The job has nothing to do before `retry_after` seconds (the history sync's failed repositories wait out
    their backoff): queued again for then, without spending an attempt."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after
