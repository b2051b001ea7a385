"""Progress of long commands on stderr: one module for every command.

A :class:`Progress` is a context manager and a callable: ``tick(label)``
marks one step done (the protocol runner's ``progress`` hook has this
shape).  Where stderr goes decides the form:

* a terminal: one bar redrawn in place, with the step count, the current
  phase and an ETA (mean time per step so far times the steps left);
* anything else (a pipe, a file, a CI log): one plain line per step.

Either form starts ``announce_after`` seconds (2 s) after the command did:
then a ``started`` line (with the phase under way and the last step done)
shows that the command is alive, and every step from then on is printed as
it happens.  A command refused in its first instant (bad input) therefore
prints its one error line alone, and a command that is done within the delay
prints nothing;
* ``quiet=True`` (the commands' ``--quiet``): nothing at all.

Nothing here goes to stdout, so ``--json`` output stays one object.

Examples
--------
>>> import io
>>> out = io.StringIO()
>>> with Progress("demo", total=2, stream=out, clock=iter(range(100)).__next__, announce_after=0) as tick:
...     tick("first")
...     tick("second")
>>> print(out.getvalue(), end="")
dpdpca demo: started, 2 steps
dpdpca demo: [1/2] first (2 s, ETA 2 s)
dpdpca demo: [2/2] second (3 s)
dpdpca demo: done in 4 s
"""

from __future__ import annotations

import shutil
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO, TypeVar

__all__ = ["Progress", "format_seconds", "quiet_option"]

F = TypeVar("F", bound=Callable[..., Any])


def format_seconds(seconds: float) -> str:
    """``42 s``, ``3 min 05 s``, ``1 h 02 min``: short, for a progress line."""
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {(s % 3600) // 60:02d} min"


class Progress:
    """Progress of one command on stderr: a bar on a terminal, plain lines elsewhere, nothing when quiet.

    Parameters
    ----------
    command : str
        The command's name as the user typed it (``"bench crypto"``); every
        line starts with ``dpdpca <command>:``.
    total : int or None
        Steps the command will tick, when known: enables the ETA.  More ticks
        than ``total`` raise the total rather than fail.
    quiet : bool
        Print nothing.
    stream : text stream or None
        Default ``sys.stderr`` (looked up when entered, so test runners that
        replace it are honoured).
    interactive : bool or None
        Force the bar (True) or plain lines (False); default: whether
        ``stream`` is a terminal.
    clock : callable or None
        Seconds, monotonic; default :func:`time.monotonic` (tests pass a fake).
    announce_after : float
        Seconds of silence at the start (0: none).  When the command fails,
        nothing more is printed (its error line follows alone).
    """

    def __init__(self, command: str, *, total: int | None = None, quiet: bool = False,
                 stream: TextIO | None = None, interactive: bool | None = None,
                 clock: Callable[[], float] | None = None, announce_after: float = 2.0) -> None:
        self.command = command
        self.total = total
        self.quiet = bool(quiet)
        self._stream = stream
        self._interactive = interactive
        self._clock = clock or time.monotonic
        self._lock = threading.RLock()
        self.done = 0
        self.start = 0.0
        self.announce_after = float(announce_after)
        self._printed = False
        self._timer: threading.Timer | None = None
        self._pending: str | None = None
        self._last: str | None = None

    # -- context -----------------------------------------------------------------------------
    def __enter__(self) -> Progress:
        self.stream: TextIO = self._stream if self._stream is not None else sys.stderr
        if self._interactive is None:
            isatty = getattr(self.stream, "isatty", None)
            self._interactive = bool(isatty and isatty())
        self.start = self._clock()
        if not self.quiet:
            if self.announce_after <= 0:
                self._announce()
            else:
                self._timer = threading.Timer(self.announce_after, self._announce)
                self._timer.daemon = True
                self._timer.start()
        return self

    def _announce(self) -> None:
        with self._lock:
            if self._printed:
                return
            elapsed = self._clock() - self.start
            if self._interactive:
                self._draw(f"{self._pending} ..." if self._pending else (self._last or "starting"), elapsed)
                return
            steps = f", {self.total} steps" if self.total else ""
            self._line(f"started{steps}")
            if self._last is not None:
                self._step_line(self._last, elapsed)
            if self._pending is not None:
                self._line(f"{self._pending} ...")

    def __exit__(self, exc_type: Any, *exc: object) -> None:
        if self._timer is not None:
            self._timer.cancel()
        with self._lock:
            printed, self._printed = self._printed, True  # a late timer prints nothing now
            if self.quiet or not printed:
                return
            if self._interactive:
                self.stream.write("\r\x1b[K")  # the bar leaves no trace but the summary line
                self.stream.flush()
            if exc_type is None:
                self._line(f"done in {format_seconds(self._clock() - self.start)}")

    # -- ticks -------------------------------------------------------------------------------
    def __call__(self, label: str) -> None:
        """One step done: ``label`` names it (``"owner 3"``, ``"sweep epsilon"``)."""
        with self._lock:
            self.done += 1
            if self.total is not None and self.done > self.total:
                self.total = self.done
            if self.quiet:
                return
            elapsed = self._clock() - self.start
            if not self._printed:  # still in the silent start: the announcement will show it
                self._last, self._pending = label, None
                if elapsed < self.announce_after:
                    return
                self._announce()
                return
            if self._interactive:
                self._draw(label, elapsed)
            else:
                self._step_line(label, elapsed)

    def _step_line(self, label: str, elapsed: float) -> None:
        count = f"[{self.done}/{self.total}]" if self.total else f"[{self.done}]"
        self._line(f"{count} {label} ({format_seconds(elapsed)}{self._eta(elapsed)})")

    def phase(self, label: str) -> None:
        """Announce a phase that starts now, without counting a step (a long step's name, before it runs).

        Before anything was printed it waits for the ``started`` line, which names it.
        """
        if self.quiet:
            return
        with self._lock:
            if not self._printed:
                self._pending = label
            elif self._interactive:
                self._draw(label + " ...", self._clock() - self.start)
            else:
                self._line(f"{label} ...")

    def _eta(self, elapsed: float) -> str:
        if not self.total or self.done <= 0 or self.done >= self.total:
            return ""
        return f", ETA {format_seconds(elapsed / self.done * (self.total - self.done))}"

    def _line(self, text: str) -> None:
        self._printed = True
        self.stream.write(f"dpdpca {self.command}: {text}\n")
        self.stream.flush()

    def _draw(self, label: str, elapsed: float = 0.0) -> None:
        cols = shutil.get_terminal_size((80, 20)).columns
        if self.total:
            width = 20
            filled = int(width * min(self.done, self.total) / self.total)
            bar = f"[{'#' * filled}{'-' * (width - filled)}] {self.done}/{self.total}"
        else:
            bar = f"[{self.done}]"
        text = f"dpdpca {self.command} {bar} {label} {format_seconds(elapsed)}{self._eta(elapsed)}"
        self._printed = True
        self.stream.write("\r\x1b[K" + text[: max(10, cols - 1)])
        self.stream.flush()


def quiet_option(fn: F) -> F:
    """The ``--quiet`` flag of every long command: no progress on stderr."""
    import click

    return click.option("--quiet", "-q", "quiet", is_flag=True,
                        help="No progress on stderr (a bar on a terminal, one line per phase otherwise).")(fn)
