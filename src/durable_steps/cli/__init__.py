"""The ``durable-steps`` command line: its commands and the demo. It may import every
part; no part imports it. Nothing here is public API (the console script is
``durable_steps.cli.main:main``).
"""
