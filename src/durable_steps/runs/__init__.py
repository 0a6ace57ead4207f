"""The client side of a run: what callers use to reach a run from outside it.

The engine (``runner``) runs a run in this process; the modules here act on a run
from anywhere else, through the store -- they import the engine, and nothing in the
engine imports them (the import contracts in ``pyproject.toml`` check it). Where one
feature has a side inside a step and a side outside, the first is in the engine and
the second here: ``write_stream`` / ``read_stream``, ``set_event`` / ``get_event``,
``receive`` / ``send_message``, ``wait_for_signal`` / ``send_signal``.

    handle        RunHandle[T], handle_for: one object for everything done to a run
    results       wait_for_result: a run's result, waited for
    cancel        cancel_run: a run (and its children) cancelled from outside
    signals       send_signal: a signal delivered
    mailbox       send_message, pending_messages: messages sent, and those waiting
    resume        resume_run: a failed run made runnable again
    upgrade       upgrade_run: a run moved to another version of its workflow
    history       run_history, load_at: the steps a run kept
    fork          fork_run: a new run from a kept step of another
    streams       read_stream: a run's output streams, read as they come
    stream_index  list_streams, stream_info: a run's streams, listed
    events        get_event, get_events: what a run published

Starting a run (``Workflow.start``) stays with ``Workflow`` in the engine: it is how
the engine is entered, and the workers run it.
"""
