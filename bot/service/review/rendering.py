"""The review page's HTML: Jinja2 templates (autoescaped) in `templates/`, rendered on the server."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

TEMPLATES = Jinja2Templates(directory=Path(__file__).parent / "templates")
TEMPLATES.env.filters["pct"] = lambda v: "n/a" if v is None else f"{100 * v:.0f}%"
TEMPLATES.env.filters["when"] = lambda t: time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t))
# The page is never framed, never cached, and loads nothing from elsewhere.
HEADERS = {"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; "
                                      "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
           "X-Frame-Options": "DENY", "Cache-Control": "no-store", "Referrer-Policy": "same-origin"}


def page(request: Request, template: str, **context: Any) -> HTMLResponse:
    return TEMPLATES.TemplateResponse(request, template, context, headers=HEADERS)
