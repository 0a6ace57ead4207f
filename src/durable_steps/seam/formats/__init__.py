"""Every stored format of earlier versions, read in one place: upgraders applied at load,
pure functions from an old representation to today's document (``seam.document``,
schema 4). The rest of the code reads today's format only; a save writes today's, so a
run is upgraded on disk by its next save.

- ``schemas``: documents of schemas 1 to 3 (1: ``done`` and no lease, no workflow; 2:
  no journal, timers or cancel reason; 3: journal records without a task), and the
  error names earlier versions recorded (``durable_steps._errors.X``).
- ``whole_file``: a FileStore run file of version 0.1, one whole JSON document (today's
  is a log of records, whose first byte is 0x1E).

Not here: Cosmos DB containers of the earlier ``/id`` layout (the whole checkpoint in
one item). Their items are read as today's inline heads are (the item is the document,
its schema upgraded here); the layout is still *written* by the Cosmos DB store, which
keeps such containers working (``stores.cosmos.plan``, its ``legacy`` branch), ``doctor``
names it and ``migrate`` moves its runs to a ``/run`` container. The seam imports no
store: these functions know representations, not backends.
"""

from __future__ import annotations

from .schemas import EARLIER, upgrade
from .whole_file import is_whole_document, read_whole

__all__ = ["EARLIER", "is_whole_document", "read_whole", "upgrade"]
