"""Development aids: what a developer runs next to an application, never part of it.

``cosmos_server``: the local Cosmos DB protocol server that ``durable-steps dev
cosmos-server`` and the pytest plugin's ``cosmos-local`` backend start. The runner,
the stores, the seam and the workers never import this package (an import rule);
it imports no other part of durable-steps, and needs no pytest.
"""
