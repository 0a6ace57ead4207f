"""CosmosStore and AsyncCosmosStore: load, save and delete as programs of SDK calls,
item bodies and listing queries, and the Azure SDK behind one border. Imported only when
asked for (``backend``). Nothing here is public API: import from ``durable_steps``.
"""
