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

Request lines are written compactly with keys in the order the daemon's own
types use, so they are byte for byte what the Rust client sends.
"""

from __future__ import annotations

import json
import math
import re
import socket
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

__all__ = [
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
]

#: The daemon's default socket.
DEFAULT_SOCKET = "/run/atoll/atoll.sock"
#: The protocol version this module speaks.
PROTOCOL_VERSION = 1
#: Seconds a call waits for the daemon (longer than the daemon's own 10 s
#: wait for its control loop, so that its error arrives first).
DEFAULT_TIMEOUT = 30.0
#: Longest reply line accepted, bytes.
MAX_REPLY = 64 * 1024 * 1024
#: Resources of ``tune``.
RESOURCES = ("cores", "cpu_time", "memory")
#: Directions of ``tune``.
DIRECTIONS = ("up", "down")

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}\Z")


class AtollError(Exception):
    """The daemon answered with an error (``err``)."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        #: Machine-readable kind: ``bad_request``, ``unsupported_version``,
        #: ``permission_denied``, ``not_found``, ``backend``, ``shutting_down``.
        self.code = code
        #: What went wrong, for people.
        self.message = message


class ProtocolError(Exception):
    """The daemon's answer is not a reply this client understands."""


@dataclass(frozen=True)
class Ack:
    """A coordination message was acknowledged."""

    #: The effects applied, each ``{"change": {...}, "why": {...}}``.
    effects: List[Dict[str, Any]]
    #: The same in words.
    text: str
    acked: bool = field(default=True, init=False)

    def __bool__(self) -> bool:
        return True


@dataclass(frozen=True)
class Nack:
    """A coordination message was refused (an answer, not an error)."""

    #: Why, e.g. ``{"nack": "at_capacity", "island": "web", ...}``.
    reason: Dict[str, Any]
    #: The same in words.
    text: str
    acked: bool = field(default=False, init=False)

    @property
    def kind(self) -> str:
        """The reason's kind, e.g. ``at_capacity``."""
        return str(self.reason.get("nack", ""))

    def __bool__(self) -> bool:
        return False


@dataclass(frozen=True)
class Reported:
    """A report was recorded."""

    #: The overlay.
    overlay: str
    #: Whether its property holds at the value reported.
    holds: bool
    #: What the overlay's policy did about it, in words, if anything.
    action: Optional[str] = None


def _name(what: str, value: Any) -> str:
    if not isinstance(value, str) or not _NAME.match(value):
        raise ValueError(
            f"{what} {value!r} is not a name (1 to 64 ASCII letters, digits, "
            "'_' and '-', starting with a letter or digit)"
        )
    return value


def _choice(what: str, value: Any, choices: tuple) -> str:
    if value not in choices:
        raise ValueError(f"{what} {value!r} is not one of {', '.join(choices)}")
    return value


class Client:
    """One connection to the daemon at ``socket_path``."""

    def __init__(self, socket_path: str = DEFAULT_SOCKET, timeout: Optional[float] = DEFAULT_TIMEOUT):
        self.socket_path = socket_path
        self._next_id = 1
        #: Text of the last coordination answer (effects, nack reason).
        self.last_text = ""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect(socket_path)
        except BaseException:
            sock.close()
            raise
        self._sock = sock
        self._reader = sock.makefile("rb")

    def close(self) -> None:
        """Closes the connection."""
        self._reader.close()
        self._sock.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def set_timeout(self, timeout: Optional[float]) -> None:
        """Seconds each call waits for the daemon (``None``: forever)."""
        self._sock.settimeout(timeout)

    # -- the protocol ---------------------------------------------------

    def request(self, op: str, fields: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        """Sends one request and returns the ``ok`` object of its reply;
        raises :class:`AtollError` for an ``err`` reply."""
        rid = self._next_id
        self._next_id += 1
        envelope: Dict[str, Any] = {"v": PROTOCOL_VERSION, "id": rid, "op": op}
        envelope.update(fields or {})
        line = json.dumps(envelope, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        self._sock.sendall(line.encode("utf-8") + b"\n")
        while True:
            reply = self._read_reply()
            got = reply.get("id")
            # Id 0: the daemon could not tie its answer to a request (it
            # refused the connection); it is still the answer.
            if got == rid or got == 0:
                break
            if not isinstance(got, int) or got > rid:
                raise ProtocolError(f"reply to request {got!r} while waiting for request {rid}")
            # An answer to an earlier request we stopped waiting for.
        if "err" in reply:
            err = reply["err"]
            if not isinstance(err, dict):
                raise ProtocolError(f"err is not an object: {err!r}")
            raise AtollError(str(err.get("code", "")), str(err.get("message", "")))
        ok = reply.get("ok")
        if not isinstance(ok, dict):
            raise ProtocolError(f"reply has neither ok nor err: {reply!r}")
        return ok

    def _read_reply(self) -> Dict[str, Any]:
        line = self._reader.readline(MAX_REPLY + 1)
        if not line:
            raise ConnectionError(f"the atoll daemon at {self.socket_path} closed the connection")
        if not line.endswith(b"\n"):
            if len(line) > MAX_REPLY:
                raise ProtocolError(f"reply longer than {MAX_REPLY} bytes")
            raise ConnectionError(f"the atoll daemon at {self.socket_path} closed the connection")
        try:
            reply = json.loads(line)
        except ValueError as e:
            raise ProtocolError(f"undecodable reply {line[:200]!r}: {e}") from None
        if not isinstance(reply, dict):
            raise ProtocolError(f"reply is not an object: {line[:200]!r}")
        return reply

    def _expect(self, ok: Dict[str, Any], kind: str) -> Dict[str, Any]:
        if ok.get("kind") != kind:
            raise ProtocolError(f"expected a {kind} reply, got {ok.get('kind')!r}")
        return ok

    # -- requests -------------------------------------------------------

    def status(self) -> Dict[str, Any]:
        """Islands, units, processes and their usage (the ``status`` reply,
        without ``kind``)."""
        ok = dict(self._expect(self.request("status"), "status"))
        del ok["kind"]
        return ok

    def overlays(self) -> List[Dict[str, Any]]:
        """Every overlay: units, property, last value, loans, nacks."""
        return list(self._expect(self.request("overlays"), "overlays")["overlays"])

    def coordinate(self, message: Dict[str, Any], from_island: Optional[str] = None):
        """Sends one coordination message (a dict tagged by ``msg``, see
        docs/api.md) from island ``from_island`` (``None``: the daemon's
        default sender). Returns :class:`Ack` or :class:`Nack`."""
        if not isinstance(message, dict) or "msg" not in message:
            raise ValueError(f"message {message!r} is not a dict with a 'msg'")
        fields: Dict[str, Any] = {}
        if from_island is not None:
            fields["from"] = _name("from_island", from_island)
        fields["message"] = message
        ok = self._expect(self.request("coordinate", fields), "coordinated")
        reply = ok.get("reply")
        text = str(ok.get("text", ""))
        if not isinstance(reply, dict):
            raise ProtocolError(f"coordinated reply without a reply: {ok!r}")
        if reply.get("reply") == "ack":
            result: Any = Ack(effects=list(reply.get("effects", [])), text=text or "ack")
        elif reply.get("reply") == "nack":
            reason = dict(reply.get("reason", {}))
            result = Nack(reason=reason, text=text or f"nack: {reason.get('nack', '?')}")
        else:
            raise ProtocolError(f"neither ack nor nack: {reply!r}")
        self.last_text = result.text
        return result

    def tune(
        self,
        overlay: str,
        unit: str,
        resource: str = "cpu_time",
        dir: str = "up",
        from_island: Optional[str] = None,
    ):
        """Tunes ``unit``'s share of ``resource`` one step ``dir``."""
        return self.coordinate(
            {
                "msg": "tune",
                "resource": _choice("resource", resource, RESOURCES),
                "dir": _choice("dir", dir, DIRECTIONS),
                "overlay": _name("overlay", overlay),
                "unit": _name("unit", unit),
            },
            from_island,
        )

    def trigger(self, overlay: str, unit: str, from_island: Optional[str] = None):
        """Boosts ``unit``'s CPU time at once, for a bounded time."""
        return self.coordinate(
            {
                "msg": "trigger",
                "resource": "cpu_time",
                "overlay": _name("overlay", overlay),
                "unit": _name("unit", unit),
            },
            from_island,
        )

    def borrow(
        self,
        overlay: str,
        amount: int = 1,
        island: Optional[str] = None,
        into: Optional[str] = None,
    ):
        """Borrows up to ``amount`` CPUs for ``overlay`` from ``island``
        (``None``: any island that can lend) into island ``into``
        (``None``: the island of the overlay's first unit)."""
        if isinstance(amount, bool) or not isinstance(amount, int) or not 0 <= amount < 2**32:
            raise ValueError(f"amount {amount!r} is not a count of CPUs")
        message: Dict[str, Any]
        if island is None:
            message = {"msg": "borrow_any", "resource": "cores", "overlay": _name("overlay", overlay)}
        else:
            message = {
                "msg": "borrow_preferred",
                "resource": "cores",
                "overlay": _name("overlay", overlay),
                "island": _name("island", island),
            }
        message["amount"] = amount
        return self.coordinate(message, into)

    def release(self, overlay: str, island: str, into: Optional[str] = None):
        """Gives back to ``island`` the CPUs island ``into`` (``None``: the
        island of the overlay's first unit) borrowed from it for
        ``overlay``."""
        return self.coordinate(
            {
                "msg": "release",
                "resource": "cores",
                "overlay": _name("overlay", overlay),
                "island": _name("island", island),
            },
            into,
        )

    def register(self, spec: Dict[str, Any]):
        """Brings an overlay in: ``spec`` is ``{"name", "priority", "units":
        [[island, unit], ...], "property": {"kind": ..., ...}}``."""
        if not isinstance(spec, dict):
            raise ValueError(f"spec {spec!r} is not a dict")
        _name("overlay name", spec.get("name"))
        return self.coordinate({"msg": "register", "overlay": spec})

    def deregister(self, name: str):
        """Takes overlay ``name`` out."""
        return self.coordinate({"msg": "deregister", "overlay": _name("overlay", name)})

    def report(self, overlay: str, value: float) -> Reported:
        """Reports the current value of ``overlay``'s property (latency in
        µs, or operations per second)."""
        value = float(value)
        if not math.isfinite(value):
            raise ValueError(f"value {value!r} is not finite")
        ok = self._expect(
            self.request("report", {"overlay": _name("overlay", overlay), "value": value}),
            "reported",
        )
        return Reported(
            overlay=str(ok.get("overlay", overlay)),
            holds=bool(ok.get("holds")),
            action=ok.get("action"),
        )
