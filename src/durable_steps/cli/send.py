"""``durable-steps runs send``: a message into a run's mailbox from a shell or a script
(``send_message``; the run's step takes it with ``receive(TOPIC)``)."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from ..runs.mailbox import send_message
from ..stores.config import store_for
from .common import say


@click.command("send")
@click.argument("run_id")
@click.argument("topic")
@click.argument("payload")
@click.option(
    "--idempotency-key",
    "key",
    metavar="KEY",
    help="Deliver once: a second send with the same KEY (on this topic) changes nothing. "
    "A run remembers the keys of its last 128 keyed sends.",
)
@click.option("--text", is_flag=True, help="Send PAYLOAD as a string, not as JSON.")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
def runs_send(  # noqa: PLR0917 (click passes each argument and option)
    run_id: str, topic: str, payload: str, key: str | None, text: bool, as_json: bool
) -> None:
    """Send a message to run RUN_ID on TOPIC: PAYLOAD is a JSON value ('-': read it
    from standard input), or text with --text. The run's step takes it with
    receive(TOPIC), once, in send order; a run waiting for it resumes at its next run
    (or with recover, or a worker). A completed or cancelled run takes no message.
    Examples:

    \b
      durable-steps runs send chat-42 chat '{"role": "user", "content": "hi"}'
      durable-steps runs send chat-42 chat --text 'and in French?' --idempotency-key m-7
      echo '{"ok": true}' | durable-steps runs send order-1042 decisions -
    """
    value = _payload(payload, text)
    with store_for("env", create=False) as store:
        number = send_message(store, run_id, topic, value, idempotency_key=key)
        head = store.load_head(run_id)
    status = None if head is None else head.status
    if as_json:
        click.echo(json.dumps({"run_id": run_id, "topic": topic, "seq": number, "status": status}))
        return
    woke = ""
    if status == "running":
        woke = " (it resumes at its next run, or with recover, or a worker)"
    say(f"message {number} on {topic} sent to run {run_id}: it is {status}{woke}")


def _payload(payload: str, text: bool) -> Any:
    raw = sys.stdin.read() if payload == "-" else payload
    if text:
        return raw
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise click.BadParameter(
            f"not JSON ({exc}); give a JSON value, e.g. '\"hello\"' or '{{\"ok\": true}}' "
            "(quoted for the shell), or send it as a string with --text",
            param_hint="'PAYLOAD'",
        ) from None
