"""Errors a user can act on.

Every failure that comes from the user's input (a bad path, a trace that is not JSON, a device
that is not there) raises :class:`OpscopeError` with a one-line message.  The CLI prints that
line and exits 1 (2 for a :class:`UsageError`); anything else is a bug and keeps its traceback
(shown with ``--debug``).
"""

from __future__ import annotations


class OpscopeError(Exception):
    """A failure caused by the input or the environment, with a one-line explanation."""


class UsageError(OpscopeError):
    """A command line that cannot be run as given (arguments that contradict each other, an
    empty query): the CLI exits 2, as for an argument argparse refuses."""


class TraceError(OpscopeError):
    """A trace file that cannot be read (not JSON, wrong gzip, empty, too large)."""


class DeviceError(OpscopeError):
    """An unknown or unavailable device."""


class ScheduleError(OpscopeError):
    """A profiler schedule whose active window is never reached."""
