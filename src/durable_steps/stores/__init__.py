"""The stores: memory, file (``file/``) and Cosmos DB (``cosmos/``), and ``config``, the
one module that reads the environment and knows every backend. Stores import only the
seam, never the runner. Nothing here is public API: import from ``durable_steps``.
"""
