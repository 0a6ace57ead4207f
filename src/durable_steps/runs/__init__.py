"""The client side of a run: what callers use to reach a run from outside.

Starting aside (``Workflow.start``, in the engine), every way to act on a run that
is not this process's own lives here -- waiting for its result, cancelling it,
signalling it, sending it messages, resuming, forking or upgrading it, reading its
history, streams and events. These modules import the engine (``runner``); nothing
in the engine imports them (an import contract in ``pyproject.toml`` says so).
"""
