"""The worker image's Dockerfile, parsed (no Docker engine here to build it): it runs
`durable-steps worker` as a non-root user, stops it with SIGTERM, installs what the
Cosmos DB store needs and copies only what exists, and keeps secrets out."""

from __future__ import annotations

import json
from pathlib import Path

from dockerfile_parse import DockerfileParser

ROOT = Path(__file__).parents[2]


def instructions() -> list[tuple[str, str]]:
    parser = DockerfileParser(str(ROOT / "Dockerfile"))
    return [(i["instruction"], i["value"]) for i in parser.structure]


def test_the_worker_image_runs_the_worker_as_a_user_and_stops_gracefully() -> None:
    """Exec-form ENTRYPOINT `durable-steps worker` (so SIGTERM reaches the worker, not a
    shell), STOPSIGNAL SIGTERM, a non-root USER before it, Python 3.11+, unbuffered
    output (a worker's lines reach the platform's log at once)."""
    ins = instructions()
    (base,) = [v for k, v in ins if k == "FROM"]
    image, _, tag = base.partition(":")
    assert image == "python"
    assert tuple(int(n) for n in tag.split("-")[0].split(".")) >= (3, 11)
    assert json.loads(dict(ins)["ENTRYPOINT"]) == ["durable-steps", "worker"]
    assert dict(ins)["STOPSIGNAL"] == "SIGTERM"
    users = [v for k, v in ins if k == "USER"]
    assert users and users[-1] not in ("root", "0")
    order = [k for k, _ in ins]
    assert order.index("USER") < order.index("ENTRYPOINT")
    assert "PYTHONUNBUFFERED=1" in " ".join(v for k, v in ins if k == "ENV")


def test_the_image_installs_the_cosmos_extra_from_files_that_exist() -> None:
    """It installs this package with every extra a worker may need, at the versions of
    the constraints file, every path it copies exists in the repository, and no store
    setting or secret is baked in."""
    ins = instructions()
    runs = " ".join(v for k, v in ins if k == "RUN")
    assert 'pip install -c constraints.txt ".[cosmos,schedules,zstd,encryption]"' in runs
    for value in (v for k, v in ins if k == "COPY"):
        *sources, _ = value.split()
        for source in sources:
            assert (ROOT / source).exists(), source
    baked = " ".join(v for k, v in ins if k in ("ENV", "ARG"))
    for secret in ("COSMOS_KEY", "COSMOS_ENDPOINT", "DURABLE_STORE", "AZURE_CLIENT_SECRET"):
        assert secret not in baked


def test_the_base_image_and_the_dependencies_are_pinned() -> None:
    """The base image names a patch release (not a moving minor tag), the constraints
    file pins every dependency it lists to one version -- each extra's packages among
    them --, and there is no CMD that would exit at once (``--help``: a restart loop);
    without a target of the user's image the worker says which argument is missing."""
    ins = instructions()
    (base,) = [v for k, v in ins if k == "FROM"]
    version = base.partition(":")[2].split("-")[0]
    assert version.count(".") == 2, base
    pins = {}
    for line in (ROOT / "infra" / "worker-constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, pinned = line.partition("==")
            assert pinned and pinned.strip(), line
            pins[name.strip().lower()] = pinned
    for needed in ("azure-cosmos", "azure-identity", "aiohttp", "croniter", "zstandard"):
        assert needed in pins, needed
    assert "cryptography" in pins and "click" in pins
    assert "CMD" not in dict(ins)
