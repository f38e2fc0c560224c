"""Client of the atoll daemon's local API (protocol version 1), standard
library only (Python 3.9+).

The daemon speaks newline-delimited JSON over a Unix socket (docs/api.md):
each request is one line ``{"v":1,"id":N,"op":...}``, each reply one line
with the same id and either ``ok`` or ``err``. One :class:`Client` is one
connection; calls are sequential.

Coordination (inTune) answers are results, not exceptions: a coordination
call returns :class:`Ack` (with the effects the daemon applied) or
:class:`Nack` (with the reason); ``bool(result)`` is true for an ack. An
``err`` reply raises :class:`AtollError` with the daemon's ``code`` and
``message``; a broken or closed connection raises ``OSError`` (a
``ConnectionError`` when the daemon hung up, ``socket.timeout`` when it did
not answer in time); an answer that makes no sense raises
:class:`ProtocolError`.

    >>> with Client() as c:                                  # doctest: +SKIP
    ...     r = c.report("shop", 1234.5)
    ...     print(r.holds, r.action)
    ...     if not c.tune("shop", "api", "cpu_time", "up"):
    ...         print("refused:", c.last_text)

Reconfigurable applications (BarbequeRTRM): :meth:`Client.app_register`,
:meth:`Client.app_poll`, :meth:`Client.app_report`, :meth:`Client.app_done`
and :meth:`Client.apps`, with :class:`AppRuntime`, the paper's execution
loop over them (a step at a time with :meth:`AppRuntime.next_step`, or with
callbacks through :meth:`AppRuntime.run`).

    >>> with Client() as c:                                  # doctest: +SKIP
    ...     rt = AppRuntime(c, load_recipe("awm_parallel.toml"), goal_cps=20.0)
    ...     while True:
    ...         step = rt.next_step()          # polls, reports, blocks while waiting
    ...         if step.kind == "configure":
    ...             set_threads(step.assignment.parallelism)
    ...         elif step.kind == "run":
    ...             one_cycle()
    ...             rt.cycles_done(1)
    ...         elif step.kind == "release":
    ...             break
    ...     rt.done()

Request lines are written compactly with keys in the order the daemon's own
types use, so they are byte for byte what the Rust client sends.
"""

from .client import (
    DEFAULT_SOCKET,
    DEFAULT_TIMEOUT,
    DIRECTIONS,
    PROTOCOL_VERSION,
    RESOURCES,
    Ack,
    Assignment,
    AtollError,
    Client,
    Nack,
    ProtocolError,
    Reported,
    load_recipe,
    normalize_recipe,
    parse_recipe,
)
from .runtime import AppRuntime, RuntimeSummary, Step

#: The version of this package: atoll's version (the daemon's and the C
#: library's), checked by clients/test.sh.
__version__ = "0.1.0"

__all__ = [
    "__version__",
    "DEFAULT_SOCKET",
    "DEFAULT_TIMEOUT",
    "PROTOCOL_VERSION",
    "RESOURCES",
    "DIRECTIONS",
    "Ack",
    "Nack",
    "Reported",
    "AtollError",
    "ProtocolError",
    "Client",
    "Assignment",
    "Step",
    "RuntimeSummary",
    "AppRuntime",
    "normalize_recipe",
    "parse_recipe",
    "load_recipe",
]
