"""A local Cosmos DB: the npm protocol server ``@vercel/cosmosdb-server``, a real
process on loopback that the real ``azure-cosmos`` SDK talks to over HTTP.

Started by ``durable-steps dev cosmos-server`` (for an application run by hand) and by
the pytest plugin's ``cosmos-local`` backend (for tests), the same way, here. It needs
Node.js 20+ and the package installed where Node.js resolves it from the directory
it starts in: ``npm install @vercel/cosmosdb-server@1.0.1`` there or in a directory
above it (its ``node_modules``), or a directory on ``NODE_PATH``. Its data lives in
the server's memory and goes when it stops. It accepts the key every Cosmos DB
emulator accepts (``EMULATOR_KEY``).

The server is started through a small wrapper (``_WRAPPER``) around its request
handlers, so that it answers as the real service does where version 1.0.1 does not
(no patch of ``node_modules`` is needed):

- a point read of a missing document: 404 (1.0.1 answers 500, dereferencing the
  document it did not find);
- any document operation in a container (or database) that does not exist: 404 with
  sub-status 1003, "owner resource not found" (1.0.1 answers a bare 404 or 500);
- a write sent with ``Prefer: return=minimal`` (``no_response=True`` in azure-cosmos):
  its status and ``etag`` header and no body (1.0.1 echoes the item whatever the
  client asked), so a test can see that a save's answer carries no state.

The wrapper also ends the server when its stdin closes, so a killed parent (pytest,
the command line) leaves no server behind. What the server prints once it is ready
is read by a thread of its own (kept: the last lines, for an error), so a chatty
server never blocks on a full pipe.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import threading
from collections import deque
from pathlib import Path

PACKAGE = "@vercel/cosmosdb-server@1.0.1"
INSTALL = f"npm install {PACKAGE}"

EMULATOR_KEY = (
    "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="
)
"""The key Microsoft publishes for every emulator; it opens nothing real."""

_WRAPPER = r"""
const major = parseInt(process.versions.node.split(".")[0], 10);
if (major < 20) {
  console.log("OLDNODE Node.js " + process.version + " is too old");
  process.exit(5);
}
const pkg = "@vercel/cosmosdb-server";
try { require.resolve(pkg + "/package.json"); } catch (e) {
  console.log("MISSING " + pkg + " cannot be found from " + process.cwd());
  process.exit(3);
}
const handler = (name) => require(pkg + "/lib/handler/" + name);
let read, partition, trueHeader, docs;
try {
  read = handler("read-document");
  partition = require(pkg + "/lib/utils/get-partition-from-header");
  trueHeader = require(pkg + "/lib/true-header").default;
  docs = ["read-document", "read-documents", "query-documents", "create-document",
          "replace-document", "upsert-document", "patch-document", "delete-document",
          "batch-documents"].map(handler);
} catch (e) {
  const version = require(pkg + "/package.json").version;
  console.log("UNSUPPORTED " + pkg + " " + version + " (durable-steps needs 1.0.1): " + e.message);
  process.exit(4);
}
const original = read.default;
read.default = (account, req, res, ids) => {
  const collection = account.database(ids.dbId).collection(ids.collId);
  if (!trueHeader(req, "x-ms-documentdb-query-enablecrosspartition")) {
    const key = partition.parsePartitionKey(partition.default(req), ids.docId);
    if (!collection.document(ids.docId, key).read()) {
      res.statusCode = 404;
      return { code: "NotFound", message: "Entity with the specified id does not exist." };
    }
  }
  return original(account, req, res, ids);
};
for (const module of docs) {
  const inner = module.default;
  module.default = async (account, req, res, ids) => {
    const database = account.database(ids.dbId);
    if (!database.read() || !database.collection(ids.collId).read()) {
      res.statusCode = 404;  // the service: the container (the owner resource) is not found
      res.setHeader("x-ms-substatus", "1003");
      return { code: "NotFound", message: "Owner resource does not exist" };
    }
    const body = await inner(account, req, res, ids);
    const minimal = String(req.headers["prefer"] || "").toLowerCase() === "return=minimal";
    if (minimal && req.method !== "GET" && res.statusCode < 300 && body && body._etag) {
      res.setHeader("etag", body._etag);
      return undefined;  // status and headers only, as the service answers
    }
    return body;
  };
}
const port = parseInt(process.argv[1] || "0", 10);
// Connections kept open, as the service keeps them (the package closes each one after
// its answer unless asked: a client then opens a TCP connection per request, which on
// a loaded machine costs more than the request). Idle ones are kept for ten minutes, so
// that a client's pooled connection is not closed under it between two requests.
const server = require(pkg).createHttpServer({ keepAlive: true });
server.keepAliveTimeout = 600000;
server.headersTimeout = 601000;
server.on("error", (e) => {
  console.log("LISTEN cannot listen on 127.0.0.1:" + port + ": " + (e.code || e.message));
  process.exit(6);
});
server.listen(port, "127.0.0.1", () => {
  console.log("Ready to accept HTTP connections at 127.0.0.1:" + server.address().port);
});
process.stdin.on("end", () => process.exit(0));
process.stdin.resume();
"""

_REFUSALS = ("MISSING", "UNSUPPORTED", "OLDNODE", "LISTEN")
"""What the wrapper says, as the first word of its last line, when it cannot start."""


class ServerError(RuntimeError):
    """The server is installed but did not start."""


class ServerMissing(ServerError):
    """Node.js 20+ or the npm package is not installed here."""


_output: dict[int, tuple[threading.Thread, deque[str]]] = {}
"""The reader of each running server's output (by process id) and its last lines."""


def start_cosmosdb_server(
    cwd: str | Path | None = None, *, port: int = 0
) -> tuple[subprocess.Popen[str], str]:
    """Start the server over HTTP on loopback, on ``port`` (0: a free one), resolving
    the package from ``cwd`` (None: the current directory); returns the process and
    its endpoint (``http://127.0.0.1:PORT/``) once it says it is ready. ``stop`` it."""
    node = shutil.which("node")
    if node is None:
        raise ServerMissing(f"Node.js (node) is not on PATH; install Node.js 20+, then {INSTALL}")
    proc = subprocess.Popen(
        [node, "-e", _WRAPPER, "--", str(port)],
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    seen: list[str] = []
    for line in iter(proc.stdout.readline, ""):  # node may print warnings first
        if match := re.search(r"Ready to accept HTTP connections at ([\d.]+):(\d+)", line):
            _read_on(proc)
            return proc, f"http://{match[1]}:{match[2]}/"
        seen.append(line)
        if line.startswith(_REFUSALS) or len(seen) > 50:
            break
    stop(proc)
    last = seen[-1].strip() if seen else ""
    if last.startswith("MISSING"):
        raise ServerMissing(
            f"{last.removeprefix('MISSING ')} (nor on NODE_PATH): {INSTALL} there or in a "
            "directory above it (Node.js 20+)"
        )
    if last.startswith("OLDNODE"):
        raise ServerMissing(f"{last.removeprefix('OLDNODE ')}: install Node.js 20+")
    if last.startswith("LISTEN"):
        raise ServerError(f"{last.removeprefix('LISTEN ')}; choose another port")
    raise ServerError(f"@vercel/cosmosdb-server did not start: {''.join(seen).strip()[:500]!r}")


def _read_on(proc: subprocess.Popen[str]) -> None:
    """Read what the server prints from now on, keeping its last lines."""
    tail: deque[str] = deque(maxlen=20)
    stream = proc.stdout
    assert stream is not None

    def read() -> None:
        for line in stream:
            tail.append(line)

    reader = threading.Thread(target=read, name=f"cosmosdb-server-{proc.pid}", daemon=True)
    reader.start()
    _output[proc.pid] = (reader, tail)


def last_output(proc: subprocess.Popen[str]) -> str:
    """The last lines the server printed since it was ready (to say why it ended)."""
    found = _output.get(proc.pid)
    return "".join(found[1]).strip() if found else ""


def stop(proc: subprocess.Popen[str]) -> None:
    """End the server: its stdin closed, it exits (killed if it does not, in 5 s)."""
    if proc.stdin:
        with contextlib.suppress(OSError):  # (a server that has ended: nothing to flush)
            proc.stdin.close()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    reader = _output.pop(proc.pid, None)
    if reader is not None:
        reader[0].join(5)  # it reads to the end of the output, which has come
    if proc.stdout:
        proc.stdout.close()


def cosmos_env(endpoint: str) -> dict[str, str]:
    """The variables that point ``store_from_env()`` (and the command line) at the server,
    creating the database and the container on first use."""
    return {
        "DURABLE_STORE": "cosmos",
        "COSMOS_ENDPOINT": endpoint,
        "COSMOS_KEY": EMULATOR_KEY,
        "COSMOS_CREATE_IF_MISSING": "true",
    }
