"""cosmos-local: the npm Cosmos DB protocol server ``@vercel/cosmosdb-server``, a real
process on loopback, driven through the real ``azure-cosmos`` SDK over HTTP.

Install it where your tests run: ``npm install --save-dev @vercel/cosmosdb-server@1.0.1``
(Node.js 20+). Node.js resolves it the usual way from the directory pytest runs in
(``node_modules`` there or above it, or ``NODE_PATH``).

Version 1.0.1 answers a point read of a missing document with 500 (its handler
dereferences the document it did not find); the service and the emulator answer 404.
The server is therefore started through a small wrapper (``_WRAPPER``) that answers
404 for a missing document before the original handler runs, so no patch of
``node_modules`` is needed. The wrapper also ends the server when its stdin closes,
so a killed pytest leaves no server behind.
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
let read, partition, trueHeader;
try {
  read = require(pkg + "/lib/handler/read-document");
  partition = require(pkg + "/lib/utils/get-partition-from-header");
  trueHeader = require(pkg + "/lib/true-header").default;
} catch (e) {
  const version = require(pkg + "/package.json").version;
  console.log("UNSUPPORTED " + pkg + " " + version + " (durable-steps needs 1.0.1): " + e.message);
  process.exit(4);
}
const original = read.default;
read.default = (account, req, res, ids) => {
  const collection = account.database(ids.dbId).collection(ids.collId);
  if (collection.read() && !trueHeader(req, "x-ms-documentdb-query-enablecrosspartition")) {
    const key = partition.parsePartitionKey(partition.default(req), ids.docId);
    if (!collection.document(ids.docId, key).read()) {
      res.statusCode = 404;
      return { code: "NotFound", message: "Entity with the specified id does not exist." };
    }
  }
  return original(account, req, res, ids);
};
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
