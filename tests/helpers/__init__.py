"""What tests share besides fixtures (those are in ``tests/conftest.py``): the child
processes tests start and kill (run as scripts), the local servers, the Cosmos proxy,
the CLI runner, and waiting for a condition."""
