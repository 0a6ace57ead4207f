"""FileStore and AsyncFileStore: one log per run in a local directory, its format,
listing, open files, durable writes and per-platform locks and syncs. Independent of the
Cosmos store. Nothing here is public API: import from ``durable_steps``.
"""
