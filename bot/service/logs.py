"""Structured logs: one JSON object a line, carrying the delivery id, with secrets redacted."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from bot.core.redaction import install_redaction, redact
from bot.core.settings import Settings

delivery_var: ContextVar[str | None] = ContextVar("delivery", default=None)

_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "delivery", "color_message"}


@contextmanager
def bind_delivery(delivery_id: str | None) -> Iterator[None]:
    """Every log line inside carries `delivery_id`."""
    token = delivery_var.set(delivery_id)
    try:
        yield
    finally:
        delivery_var.reset(token)


class DeliveryFilter(logging.Filter):
    """Stamps each record with the delivery being handled (set per request and per job)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "delivery", None) is None:
            record.__dict__["delivery"] = delivery_var.get()
        return True


class JsonFormatter(logging.Formatter):
    """`{"ts", "level", "logger", "msg", "delivery", ...extra}` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {"ts": round(record.created, 3), "level": record.levelname.lower(),
                                    "logger": record.name, "msg": record.getMessage()}
        delivery = getattr(record, "delivery", None)
        if delivery:
            entry["delivery"] = delivery
        entry.update({k: v for k, v in vars(record).items() if k not in _STANDARD})
        if record.exc_info or record.exc_text:
            entry["error"] = record.exc_text or self.formatException(record.exc_info)  # type: ignore[arg-type]
        # The handler's RedactingFilter masked the configured secrets; the patterns are masked again here.
        return redact(json.dumps(entry, default=str, ensure_ascii=False))


def configure_logging(level: int = logging.INFO, settings: Settings | None = None) -> None:
    """JSON lines on stderr for the service process (uvicorn's own loggers included), every line passed
    through the redacting filter (with the secrets of `settings`) on the root handler."""
    handler = logging.StreamHandler()
    handler.addFilter(DeliveryFilter())
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    install_redaction(settings, root)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
