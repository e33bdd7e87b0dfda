"""The baseline of `bench/webhook_load.py`: a FastAPI app that checks the signature and answers 202.

Its start-up heap is frozen out of the collector's full passes, as `ddl-triage serve` does, so that the
baseline is not slowed by a stall the service avoids."""

from __future__ import annotations

import gc
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from bot.service.web.signature import verify_signature

SECRET = os.environ.get("DDL_TRIAGE_WEBHOOK_SECRET", "")


@asynccontextmanager
async def lifespan(_: FastAPI) -> AsyncIterator[None]:
    gc.collect()
    gc.freeze()
    yield


app = FastAPI(lifespan=lifespan)


@app.post("/webhook")
async def webhook(request: Request) -> JSONResponse:
    body = await request.body()
    if not verify_signature(SECRET, body, request.headers.get("x-hub-signature-256")):
        return JSONResponse({"status": "rejected"}, status_code=401)
    return JSONResponse({"status": "queued"}, status_code=202)
