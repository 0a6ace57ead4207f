"""cosmos-local: the npm Cosmos DB protocol server ``@vercel/cosmosdb-server``, a real
process on loopback, driven through the real ``azure-cosmos`` SDK over HTTP.

Install it where your tests run: ``npm install --save-dev @vercel/cosmosdb-server@1.0.1``
(Node.js 20+). Node.js resolves it the usual way from the directory pytest runs in
(``node_modules`` there or above it, or ``NODE_PATH``).

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

The wrapper also ends the server when its stdin closes, so a killed pytest leaves no
server behind.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

INSTALL = "npm install --save-dev @vercel/cosmosdb-server@1.0.1"

_WRAPPER = r"""
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
const server = require(pkg).createHttpServer().listen(0, "127.0.0.1", () => {
  console.log("Ready to accept HTTP connections at 127.0.0.1:" + server.address().port);
});
process.stdin.on("end", () => process.exit(0));
process.stdin.resume();
"""


class ServerError(RuntimeError):
    """The server is installed but did not start."""


class ServerMissing(ServerError):
    """Node.js or the npm package is not installed here."""


def start_cosmosdb_server(cwd: str | Path | None = None) -> tuple[subprocess.Popen[str], str]:
    """Start the server over HTTP on a free loopback port, resolving the package from
    ``cwd``; returns the process and its endpoint once it says it is ready."""
    node = shutil.which("node")
    if node is None:
        raise ServerMissing(f"Node.js (node) is not on PATH; install Node.js 20+, then {INSTALL}")
    proc = subprocess.Popen(
        [node, "-e", _WRAPPER],
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
            return proc, f"http://{match[1]}:{match[2]}/"
        seen.append(line)
        if line.startswith(("MISSING", "UNSUPPORTED")) or len(seen) > 50:
            break
    stop(proc)
    if seen and seen[-1].startswith("MISSING"):
        raise ServerMissing(f"{seen[-1].removeprefix('MISSING ').strip()}; {INSTALL}")
    raise ServerError(f"@vercel/cosmosdb-server did not start: {''.join(seen).strip()[:500]!r}")


def stop(proc: subprocess.Popen[str]) -> None:
    proc.kill()
    proc.wait()
    for pipe in (proc.stdin, proc.stdout):
        if pipe:
            pipe.close()
