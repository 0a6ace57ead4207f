"""The runner: a run's semantics as a program of requests (load, save, call a step,
sleep), the drivers that carry them out sync and async, the lease keeper and heartbeat,
steps, signals, retries and telemetry. It imports only the seam. Nothing here is public
API: import from ``durable_steps``.
"""
