"""The connection to the daemon, its answers and the recipes of
reconfigurable applications (see the package's documentation)."""


from __future__ import annotations

import json
import math
import re
import socket
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

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
    "Assignment",
    "normalize_recipe",
    "parse_recipe",
    "load_recipe",
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
        #: ``permission_denied``, ``not_found``, ``backend``, ``shutting_down``,
        #: ``busy``.
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


@dataclass(frozen=True)
class Assignment:
    """What an application should be doing: running in a working mode with
    its resources, or waiting (with the reason)."""

    #: The application.
    app: int
    #: Grows with every change of what follows.
    generation: int
    #: ``"running"`` or ``"waiting"``.
    state: str
    #: Running: the working mode's id.
    mode: Optional[int] = None
    #: Running: the working mode's name (may be empty).
    mode_name: str = ""
    #: Running: the island.
    island: str = ""
    #: Running: CPUs' worth of time it may use.
    cpu_quota: float = 0.0
    #: Running: the CPUs it may run on, as a list such as ``"4-7"``.
    cpus: str = ""
    #: Running: threads the working mode asks for, if it says.
    threads: Optional[int] = None
    #: Running: memory it may use, bytes (0: no reservation).
    memory_bytes: int = 0
    #: Waiting: why.
    reason: str = ""

    @property
    def running(self) -> bool:
        return self.state == "running"

    @property
    def parallelism(self) -> int:
        """Threads to run: the mode's ``threads``, else the quota rounded up,
        at least 1; 0 while waiting."""
        if not self.running:
            return 0
        if self.threads is not None:
            return max(1, self.threads)
        return max(1, math.ceil(self.cpu_quota)) if self.cpu_quota > 0 else 1

    @classmethod
    def from_wire(cls, d: Any) -> "Assignment":
        """An assignment as the daemon sends it (state fields flattened)."""
        if not isinstance(d, dict) or d.get("state") not in ("running", "waiting"):
            raise ProtocolError(f"not an assignment: {d!r}")
        try:
            if d["state"] == "waiting":
                return cls(int(d["app"]), int(d["generation"]), "waiting", reason=str(d.get("reason", "")))
            threads = d.get("threads")
            return cls(
                app=int(d["app"]),
                generation=int(d["generation"]),
                state="running",
                mode=int(d["mode"]),
                mode_name=str(d.get("mode_name", "")),
                island=str(d["island"]),
                cpu_quota=float(d["cpu_quota"]),
                cpus=str(d["cpus"]),
                threads=None if threads is None else int(threads),
                memory_bytes=int(d.get("memory_bytes", 0)),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise ProtocolError(f"bad assignment {d!r}: {e!r}") from None

    def __str__(self) -> str:
        head = f"app {self.app} (generation {self.generation})"
        if not self.running:
            return f"{head}: waiting: {self.reason}"
        name = f" ({self.mode_name})" if self.mode_name else ""
        text = f"{head}: mode {self.mode}{name} on island {self.island}: {self.cpu_quota:g} CPUs' time on CPUs {self.cpus}"
        if self.threads is not None:
            text += f", {self.threads} threads"
        return text


def _int(what: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ValueError(f"{what} {value!r} is not an integer from {lo} to {hi}")
    return value


def _number(what: str, value: Any, ok: Callable[[float], bool], rule: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{what} {value!r} is not a number")
    v = float(value)
    if not math.isfinite(v) or not ok(v):
        raise ValueError(f"{what} = {value!r}: {rule}")
    return v


def _only(what: str, d: Any, keys: Tuple[str, ...]) -> Dict[str, Any]:
    if not isinstance(d, dict):
        raise ValueError(f"{what} {d!r} is not a table")
    unknown = [k for k in d if k not in keys]
    if unknown:
        raise ValueError(f"{what}: unknown field {unknown[0]!r} (expected one of {', '.join(keys)})")
    return d


def normalize_recipe(recipe: Dict[str, Any]) -> Dict[str, Any]:
    """A recipe checked as the daemon checks it (unknown fields refused,
    1 to 64 modes with unique ids, values in 0..1, quotas above 0, ...) with
    every field present in the daemon's order, so that it encodes to the
    bytes the Rust client sends. Raises ``ValueError`` naming the field."""
    r = _only("recipe", recipe, ("name", "priority", "modes"))
    name = _name("recipe name", r.get("name"))
    where = f"recipe {name}"
    priority = _int(f"{where}: priority", r.get("priority", 0), 0, 255)
    modes = r.get("modes")
    if not isinstance(modes, list) or not 1 <= len(modes) <= 64:
        raise ValueError(f"{where}: modes: 1 to 64 working modes are needed")
    out, seen = [], set()
    for i, m in enumerate(modes):
        m = _only(f"{where}: modes[{i}]", m, ("id", "name", "value", "needs"))
        mid = _int(f"{where}: modes[{i}].id", m.get("id"), 0, 255)
        if mid in seen:
            raise ValueError(f"{where}: modes[{i}].id = {mid}: already used by another mode")
        seen.add(mid)
        at = f"{where}: mode {mid}"
        label = m.get("name", "")
        if not isinstance(label, str):
            raise ValueError(f"{at}: name {label!r} is not a string")
        value = _number(f"{at}: value", m.get("value"), lambda v: 0.0 <= v <= 1.0, "must be between 0 and 1")
        n = _only(f"{at}: needs", m.get("needs"), ("cpu_quota", "threads", "exclusive_cpus", "memory_bytes", "islands"))
        quota = _number(
            f"{at}: needs.cpu_quota", n.get("cpu_quota"), lambda v: 0.0 < v <= 1e6, "must be a number of CPUs above 0"
        )
        threads = n.get("threads")
        if threads is not None:
            threads = _int(f"{at}: needs.threads", threads, 1, 2**32 - 1)
        exclusive = n.get("exclusive_cpus", False)
        if not isinstance(exclusive, bool):
            raise ValueError(f"{at}: needs.exclusive_cpus {exclusive!r} is not true or false")
        memory = _int(f"{at}: needs.memory_bytes", n.get("memory_bytes", 0), 0, 2**64 - 1)
        islands = n.get("islands")
        if islands is not None:
            if not isinstance(islands, list) or not islands:
                raise ValueError(f"{at}: needs.islands: list at least one island (or leave it out)")
            islands = [_name(f"{at}: needs.islands", x) for x in islands]
        needs = {
            "cpu_quota": quota,
            "threads": threads,
            "exclusive_cpus": exclusive,
            "memory_bytes": memory,
            "islands": islands,
        }
        out.append({"id": mid, "name": label, "value": value, "needs": needs})
    return {"name": name, "priority": priority, "modes": out}


def parse_recipe(text: str) -> Dict[str, Any]:
    """A recipe from TOML text (``name``, ``priority``, ``[[modes]]``; needs
    Python 3.11's ``tomllib``) or JSON text (starting with ``{``),
    normalized (:func:`normalize_recipe`)."""
    if text.lstrip().startswith("{"):
        return normalize_recipe(json.loads(text))
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        raise ValueError("TOML recipes need Python 3.11 or later (tomllib); use JSON") from None
    return normalize_recipe(tomllib.loads(text))


def load_recipe(path: str) -> Dict[str, Any]:
    """:func:`parse_recipe` of a file."""
    with open(path, encoding="utf-8") as f:
        return parse_recipe(f.read())


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

    # -- reconfigurable applications -------------------------------------

    def _app_id(self, what: str, asked: int, got: Any) -> None:
        if got != asked:
            raise ProtocolError(f"{what} about application {got!r}, asked about {asked}")

    def app_register(
        self, recipe: Union[str, Dict[str, Any]], pid: Optional[int] = None
    ) -> Tuple[int, Assignment]:
        """Registers a reconfigurable application: process ``pid`` (``None``:
        the caller) with ``recipe``, a recipe name of the platform
        description or a recipe dict sent along. Returns the application's
        id and its first assignment."""
        if isinstance(recipe, str):
            ref: Dict[str, Any] = {"named": _name("recipe name", recipe)}
        else:
            ref = {"inline": normalize_recipe(recipe)}
        fields: Dict[str, Any] = {"recipe": ref}
        if pid is not None:
            fields["pid"] = _int("pid", pid, 1, 2**32 - 1)
        ok = self._expect(self.request("app_register", fields), "app_registered")
        a = Assignment.from_wire(ok.get("assignment"))
        self._app_id("an assignment", ok.get("app"), a.app)
        self.last_text = str(a)
        return a.app, a

    def app_poll(self, app: int, after: Optional[int] = None) -> Assignment:
        """The application's assignment now; it changed if its generation
        differs from ``after`` (the generation last acted on)."""
        fields: Dict[str, Any] = {"app": _int("app", app, 0, 2**64 - 1)}
        if after is not None:
            fields["after"] = _int("after", after, 0, 2**64 - 1)
        ok = self._expect(self.request("app_poll", fields), "app_assignment")
        a = Assignment.from_wire(ok)
        self._app_id("an assignment", app, a.app)
        self.last_text = str(a)
        return a

    def app_report(self, app: int, cycles: int, goal_cps: Optional[float] = None) -> float:
        """Reports ``cycles`` done since registering (a counter) and the goal
        in cycles per second; returns the daemon's goal gap (``goal / rate -
        1``; 0 without a goal)."""
        fields: Dict[str, Any] = {
            "app": _int("app", app, 0, 2**64 - 1),
            "cycles": _int("cycles", cycles, 0, 2**64 - 1),
        }
        if goal_cps is not None:
            fields["goal_cps"] = _number("goal_cps", goal_cps, lambda v: v > 0, "must be above 0")
        ok = self._expect(self.request("app_report", fields), "app_reported")
        self._app_id("a report", app, ok.get("app"))
        gap = ok.get("goal_gap")
        if isinstance(gap, bool) or not isinstance(gap, (int, float)):
            raise ProtocolError(f"app_reported without a goal_gap: {ok!r}")
        return float(gap)

    def app_done(self, app: int) -> None:
        """The application is done: its resources go back."""
        ok = self._expect(self.request("app_done", {"app": _int("app", app, 0, 2**64 - 1)}), "app_done")
        self._app_id("an answer", app, ok.get("app"))

    def apps(self) -> List[Dict[str, Any]]:
        """Every application: recipe, priority, process, assignment, goal,
        rate, goal gap, reconfigurations."""
        return list(self._expect(self.request("apps"), "apps")["apps"])
