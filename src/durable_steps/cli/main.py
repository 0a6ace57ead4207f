"""The durable-steps command line: the group, its global options and the entry point.

The commands live in their own modules: ``demo`` (demo), ``runs`` (runs
list/show), ``change`` (runs signal/delete/prune), ``verify`` (runs verify),
``ops`` (doctor, migrate, worker), ``dev`` (dev cosmos-server), ``ui`` (the console
in the browser); ``common`` holds
what they share.

Errors are one line. ``main`` prints an error of ours (or of the operating system)
as ``error: <its first line>`` on stderr and exits 1; a usage error (a bad
option value, a missing argument) the same way with the command's ``--help`` to
read, exit 2. ``--debug`` shows the traceback instead.

Logging: the library itself only adds a ``NullHandler``. The command line
configures logging for its own output: ``-v`` prints the ``durable_steps``
logger's INFO lines on stderr (``-vv`` DEBUG) and azure's warnings. Without it,
azure's log lines are dropped: azure-identity logs some fourteen lines of
warnings before failing, and the one-line error that follows already says what
to do.
"""

from __future__ import annotations

import logging
import os
import sys

import click

from ..seam.errors import DurableError
from .change import runs_delete, runs_prune, runs_signal
from .common import err, first_line, options, say
from .demo import demo, demo_worker
from .dev import dev
from .history import runs_fork, runs_history
from .lifecycle import runs_cancel, runs_start
from .ops import doctor, migrate, worker
from .replay import replay_command
from .resume import runs_resume
from .runs import runs
from .send import runs_send
from .streams import runs_events, runs_stream, runs_streams
from .ui import ui
from .upgrade import runs_upgrade
from .verify import runs_verify

_NO_ARGS = getattr(click.exceptions, "NoArgsIsHelpError", ())  # click 8.2+


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "-v",
    "--verbose",
    count=True,
    help="Log what the library does on stderr (-v: INFO, -vv: DEBUG), Azure's warnings too.",
)
@click.option("--debug", is_flag=True, help="Show full tracebacks instead of one-line errors.")
@click.version_option(package_name="durable-steps", prog_name="durable-steps")
def cli(verbose: int, debug: bool) -> None:
    """Durable execution for multi-step Python work: checkpoint after every step,
    resume where a crashed run stopped.

    The store comes from the environment: DURABLE_STORE=file|cosmos|memory
    (default file, in DURABLE_FILE_PATH or .durable), COSMOS_ENDPOINT, COSMOS_KEY
    (absent: Entra ID), COSMOS_DATABASE, COSMOS_CONTAINER, COSMOS_VERIFY_TLS,
    COSMOS_CREATE_IF_MISSING (true for emulators only); DURABLE_CREATE_IF_MISSING=false
    makes a missing store an error instead of a new one. Examples:

    \b
      durable-steps demo
      durable-steps runs list --status waiting
      durable-steps doctor
      durable-steps ui
    """
    options["debug"] = debug
    configure_logging(verbose)


for command in (demo, demo_worker, runs, doctor, migrate, worker, dev, ui):
    cli.add_command(command)
cli.add_command(replay_command)  # new code checked against the runs in flight (cli/replay.py)
for command in (runs_start, runs_signal, runs_cancel, runs_delete, runs_prune, runs_verify):
    runs.add_command(command)
for command in (runs_history, runs_fork, runs_resume, runs_upgrade):  # a run's life
    runs.add_command(command)
for command in (runs_stream, runs_streams, runs_events):  # talking to a run (cli/streams.py)
    runs.add_command(command)
runs.add_command(runs_send)  # the mailbox (cli/send.py)


def configure_logging(verbose: int) -> None:
    """Logging for the command line's own output (never done by the library)."""
    azure = logging.getLogger("azure")
    warnings = logging.getLogger("py.warnings")  # e.g. urllib3's unverified-TLS warnings
    logging.captureWarnings(True)
    if not verbose:
        for logger in (azure, warnings):
            logger.addHandler(logging.NullHandler())
            logger.propagate = False
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    ours = logging.getLogger("durable_steps")
    ours.setLevel(logging.DEBUG if verbose > 1 else logging.INFO)
    azure.setLevel(logging.INFO if verbose > 1 else logging.WARNING)
    for logger in (ours, azure, warnings):
        logger.addHandler(handler)
        logger.propagate = False


def main(argv: list[str] | None = None) -> None:
    """The console script: run a command, turn failures into one line and an exit status."""
    for stream in (sys.stdout, sys.stderr):  # a cp1252 pipe on Windows cannot print ✓
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")
    try:
        rc = cli.main(args=argv, prog_name="durable-steps", standalone_mode=False)
    except click.exceptions.Abort:
        say("aborted", to=err)
        rc = 1
    except _NO_ARGS as exc:  # `durable-steps` alone: the help, as click prints it
        exc.show()
        rc = exc.exit_code
    except click.UsageError as exc:
        command = exc.ctx.command_path if exc.ctx else "durable-steps"
        message = exc.format_message().rstrip(".")
        say(("error: ", "red"), f"{message}; see '{command} --help'", to=err)
        rc = exc.exit_code
    except click.ClickException as exc:
        say(("error: ", "red"), exc.format_message(), to=err)
        rc = exc.exit_code
    except BrokenPipeError:
        # The reader went away (`runs list | head`): nothing left to say to it.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        rc = 1
    except (DurableError, OSError) as exc:
        if options["debug"]:
            raise
        say(("error: ", "red"), first_line(exc), to=err)
        rc = 1
    except KeyboardInterrupt:
        say("interrupted", to=err)
        rc = 130
    sys.exit(rc if isinstance(rc, int) else 0)
