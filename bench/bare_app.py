"""The baseline of `bench/webhook_load.py`: a FastAPI app that checks the signature and answers 202."""

from __future__ import annotations

import os

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from bot.service.signature import verify_signature

SECRET = os.environ.get("DDL_TRIAGE_WEBHOOK_SECRET", "")
app = FastAPI()


@app.post("/webhook")
async def webhook(request: Request) -> JSONResponse:
    body = await request.body()
    if not verify_signature(SECRET, body, request.headers.get("x-hub-signature-256")):
        return JSONResponse({"status": "rejected"}, status_code=401)
    return JSONResponse({"status": "queued"}, status_code=202)
