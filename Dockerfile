# The durable-steps worker image: `durable-steps worker` on Python 3.12, with the
# Cosmos DB extra. It cannot be built on the project's CI machines (no Docker engine);
# tests/project/test_dockerfile.py parses it and checks what a worker needs.
#
# Your image adds your code and names your workflows:
#
#   FROM durable-steps-worker
#   COPY myapp/ /app/myapp/
#   CMD ["myapp.flows:WORKFLOWS", "--concurrency", "200"]
#
# Configuration comes from the environment at run time (DURABLE_STORE=cosmos,
# COSMOS_ENDPOINT, ...; no COSMOS_KEY: Entra ID through a managed identity), never
# from the image. See docs/workers.md, "Running workers in production".
FROM python:3.12-slim

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY src/ ./src/
RUN pip install ".[cosmos]" && rm -rf /src

# A user without rights: the worker needs none (its store is remote, or a mounted volume).
RUN useradd --create-home --uid 10001 worker
USER worker
WORKDIR /app

# The platform stops a container with SIGTERM: the worker then starts nothing new, each
# run stops at its next call and releases its lease, and the process exits 0. Give it
# a grace period longer than your longest single call (terminationGracePeriodSeconds).
STOPSIGNAL SIGTERM
ENTRYPOINT ["durable-steps", "worker"]
CMD ["--help"]
