# One image for every role. Pick the role with the command:
#   docker run IMAGE web       # gunicorn webhook receiver on $PORT
#   docker run IMAGE worker    # RQ worker for new issues (queue labeling); scale it out as you like
#   docker run IMAGE worker --queues feedback   # and at least one for decisions, comments, backfills
#   docker run IMAGE training-worker   # the worker for retraining runs (loads no serving model)
#   docker run IMAGE cron      # RQ's cron scheduler (periodic retraining); run exactly one
#   docker run IMAGE migrate   # Alembic migrations, once per release
# Secrets are files, never environment variables (those show in `docker inspect`): mount the App's key
# and the webhook secret, e.g. as Docker secrets (docker-compose.yml does; `issue-sorter compose-secrets`
# writes them from what `setup` wrote), and set
#   GITHUB_PRIVATE_KEY_PATH=/run/secrets/github-app-key
#   GITHUB_WEBHOOK_SECRET_PATH=/run/secrets/github-webhook-secret
# The files must be readable by uid 10001, the user the image runs as.
# linux/amd64 on every host: the lock holds the wheels of CPython 3.11 on Linux x86_64, so an arm64 host (an
# Apple silicon Mac) runs the image under emulation rather than failing to install it (README.md, "Supported
# platforms"). .dockerignore keeps everything but the sources out of the build context: never var/ (the App's
# key, the database), secrets/ or .env.
# The base image is pinned by digest (the tag is for readers; Docker pulls the digest): the multi-platform
# index of python:3.11-slim of 2026-08-05 (Python 3.11.15, Debian trixie), as docker-library/repo-info
# records it (repos/python/remote/3.11-slim.md at commit 2477d553d2fd, read 2026-12-01). To update, take
# the digest of `docker buildx imagetools inspect python:3.11-slim` and write it in both FROM lines.

# ---- the wheel: built from the source, which stays in this stage ----
FROM --platform=linux/amd64 python:3.11-slim@sha256:90744cff8f32887f075c47d747a173ff333e9e98801667af93c357fa9f5e28ff AS wheel
WORKDIR /src
COPY pyproject.toml README.md ./
# simulation/ (the fake GitHub and the replay) is for tests and benchmarks: not in the image
COPY core ./core
COPY bot ./bot
COPY trainer ./trainer
COPY issue_sorter ./issue_sorter
COPY migrations ./migrations
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

# ---- the image: the installed package only, as `pip install issue-sorter` would leave it ----
FROM --platform=linux/amd64 python:3.11-slim@sha256:90744cff8f32887f075c47d747a173ff333e9e98801667af93c357fa9f5e28ff
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    MODEL_DIR=/models PORT=8000 HF_HUB_DISABLE_TELEMETRY=1
# The dependencies first, in a layer of their own that a change of the code does not rebuild: every package
# the App runs on, pinned with its SHA-256 (requirements.lock; the test tools are in requirements-dev.lock,
# never here): torch's CPU wheel from PyTorch's CPU index, so nothing pulls a multi-GB CUDA build, and the
# offline encoder without sentence-transformers (--no-deps: the lock is complete).
COPY requirements.lock /tmp/requirements.lock
RUN pip install --require-hashes --no-deps --extra-index-url https://download.pytorch.org/whl/cpu \
        -r /tmp/requirements.lock && rm /tmp/requirements.lock
# Then the project's own wheel, whose dependencies are all in the lock.
COPY --from=wheel /wheels /wheels
RUN pip install --no-deps /wheels/*.whl && rm -rf /wheels

RUN useradd --create-home --uid 10001 sorter \
    && mkdir -p /models /var/lib/issue-sorter && chown sorter /models /var/lib/issue-sorter
USER sorter
# no source tree here: every command runs the installed package. Without DATABASE_URL the SQLite file
# goes to ./var here: mount a volume on /var/lib/issue-sorter to keep it
WORKDIR /var/lib/issue-sorter
VOLUME ["/models"]
EXPOSE 8000
# the role of the container's own command (web, worker, training-worker, cron; a one-shot command has none),
# so `docker run IMAGE worker` is checked as a worker; docker-compose.yml names each role (issue_sorter/healthcheck.py)
HEALTHCHECK --interval=30s --timeout=10s --start-period=120s --retries=3 \
    CMD ["python", "-m", "issue_sorter.healthcheck"]
ENTRYPOINT ["issue-sorter"]
CMD ["web"]
