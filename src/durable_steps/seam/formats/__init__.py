"""Every stored format of earlier versions, read in one place: upgraders applied at load,
pure functions from an old representation to today's document (``seam.document``,
schema 4). The rest of the code reads today's format only; a save writes today's, so a
run is upgraded on disk by its next save.

- ``schemas``: documents of schemas 1 to 3 (1: ``done`` and no lease, no workflow; 2:
  no journal, timers or cancel reason; 3: journal records without a task), and the
  error names earlier versions recorded (``durable_steps._errors.X``).
- ``whole_file``: a FileStore run file of version 0.1, one whole JSON document (today's
  is a log of records, whose first byte is 0x1E).
- ``id_layout``: an item of a Cosmos DB container of the earlier ``/id`` layout (the
  whole checkpoint in one item): the document it holds, and the status of its schema 1
  items as the listing query asks for it.
- ``base85``: the bytes of an encoded value of the first codec (``$ds: 1``).

The seam imports no store: these functions know representations, not backends. The
Cosmos DB store still *writes* the ``/id`` layout into a container of that layout
(``stores.cosmos.plan``, its ``legacy`` branch): a run's items there must share the
run's own partition, which is its id, so segments cannot live beside it, and the
container must keep working (DESIGN: such containers "keep loading") until its runs
are moved -- ``doctor`` names the layout and ``migrate`` moves its runs to a ``/run``
container.
"""

from __future__ import annotations

from . import id_layout
from .schemas import EARLIER, upgrade
from .whole_file import is_whole_document, read_whole

__all__ = ["EARLIER", "id_layout", "is_whole_document", "read_whole", "upgrade"]
