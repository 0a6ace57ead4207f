# The durable-steps worker image: `durable-steps worker` on Python 3.12, with every
# extra a worker may need -- cosmos (the store), schedules (Schedule's cron), zstd
# (values compressed elsewhere are read here) and encryption (DURABLE_CODEC) -- at the
# versions in infra/worker-constraints.txt, on a pinned base image. It cannot be built on the
# project's CI machines (no Docker engine); tests/project/test_dockerfile.py parses it.
#
# The image needs its target: your image adds your code and names your workflows
# (ENTRYPOINT is `durable-steps worker`; CMD is its arguments):
#
#   FROM durable-steps-worker
#   COPY myapp/ /app/myapp/
#   CMD ["myapp.flows:WORKFLOWS", "--concurrency", "200"]
#
# Without a CMD the worker exits at once with "missing argument MODULE:ATTR" (a
# platform shows it in its restart loop): there is no default that could serve.
#
# Configuration comes from the environment at run time (DURABLE_STORE=cosmos,
# COSMOS_ENDPOINT, ...; no COSMOS_KEY: Entra ID through a managed identity), never
# from the image. See docs/workers.md, "Running workers in production".
FROM python:3.12.8-slim-bookworm

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY infra/worker-constraints.txt ./constraints.txt
COPY src/ ./src/
RUN pip install -c constraints.txt ".[cosmos,schedules,zstd,encryption]" && rm -rf /src

# A user without rights: the worker needs none (its store is remote, or a mounted volume).
RUN useradd --create-home --uid 10001 worker
USER worker
WORKDIR /app

# The platform stops a container with SIGTERM: the worker then starts nothing new, each
# run stops at its next call and releases its lease, and the process exits 0. Give it
# a grace period longer than your longest single call (terminationGracePeriodSeconds).
STOPSIGNAL SIGTERM
ENTRYPOINT ["durable-steps", "worker"]
