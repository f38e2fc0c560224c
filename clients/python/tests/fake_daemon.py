"""A fake atoll daemon for the client tests: it replays canned exchanges.

The exchanges live in ``clients/fixtures/wire.json``, generated from the
daemon's own Rust types (``crates/atoll-client-c/src/wire.rs``). Each has a
request line and a reply line, both with id 0 standing for the id of the
request actually sent. For every step the fake reads one request line,
checks it byte for byte against the expected one (with the real id put in),
records any difference, and answers with the canned reply (same id).

A step is one of:

* ``"name"``: the exchange ``name`` of the fixture file;
* ``{"request": LINE, "reply": LINE}``: an exchange given in full (id 0);
* ``{"raw": TEXT}``: read any request, answer with TEXT verbatim;
* ``{"close": true}``: read any request, then hang up.

As a program (for the C example's test)::

    python3 fake_daemon.py --socket /tmp/x.sock --steps report_holds,overlays
    python3 fake_daemon.py --socket /tmp/x.sock --script steps.json

It serves connections one after another until every step is used and the
last connection is closed, then exits 0, or 1 (with each problem on stderr)
if a request differed, a step was left over, or an extra request came.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import threading
from typing import Any, Dict, List, Optional, Tuple

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fixtures", "wire.json")
_TEMPLATE = '{"v":1,"id":0,'


def load_exchanges(path: str = FIXTURES) -> Dict[str, Tuple[str, str]]:
    """The fixture file's exchanges: name -> (request line, reply line)."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    return {name: (e["request"], e["reply"]) for name, e in doc["exchanges"].items()}


def with_id(line: str, rid: int) -> str:
    """A fixture line (id 0) with id ``rid``."""
    if not line.startswith(_TEMPLATE):
        raise ValueError(f"fixture line does not start with {_TEMPLATE}: {line[:60]!r}")
    return '{"v":1,"id":%d,' % rid + line[len(_TEMPLATE):]


class FakeDaemon:
    """Listens on ``socket_path`` (at once, in the constructor) and serves
    ``steps`` in a thread started by :meth:`start`."""

    def __init__(
        self,
        socket_path: str,
        steps: List[Any],
        exchanges: Optional[Dict[str, Tuple[str, str]]] = None,
        timeout: float = 30.0,
    ):
        self.exchanges = exchanges if exchanges is not None else load_exchanges()
        for s in steps:
            if isinstance(s, str) and s not in self.exchanges:
                raise KeyError(f"no exchange {s!r} in the fixtures")
        self.steps = list(steps)
        self.timeout = timeout
        #: Every request line received, newline included.
        self.received: List[str] = []
        #: Everything that was not as expected.
        self.problems: List[str] = []
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(socket_path)
        self._listener.listen(1)
        self._listener.settimeout(timeout)
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "FakeDaemon":
        self._thread.start()
        return self

    def join(self) -> List[str]:
        """Waits until done; returns the problems."""
        self._thread.join()
        return self.problems

    def _run(self) -> None:
        try:
            while True:
                try:
                    conn, _ = self._listener.accept()
                except socket.timeout:
                    self.problems.append(f"no client connected within {self.timeout} s")
                    return
                with conn:
                    conn.settimeout(self.timeout)
                    self._serve(conn)
                if not self.steps:
                    return
        except Exception as e:  # a bug here must fail the test, not hang it
            self.problems.append(f"fake daemon failed: {e!r}")
        finally:
            self._listener.close()
            if self.steps:
                self.problems.append(f"steps never used: {self.steps!r}")

    def _serve(self, conn: socket.socket) -> None:
        reader = conn.makefile("rb")
        try:
            self._serve_lines(conn, reader)
        finally:
            # The socket closes only when its file objects are closed too.
            reader.close()
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _serve_lines(self, conn: socket.socket, reader: Any) -> None:
        while True:
            raw = reader.readline()
            if not raw:
                return  # the client hung up
            line = raw.decode("utf-8", errors="replace")
            self.received.append(line)
            if not self.steps:
                self.problems.append(f"unexpected request {line!r}")
                continue
            step = self.steps.pop(0)
            try:
                rid = json.loads(line)["id"]
                if not isinstance(rid, int) or rid < 0:
                    raise ValueError("bad id")
            except (ValueError, KeyError, TypeError):
                self.problems.append(f"request without a valid id: {line!r}")
                rid = 0
            if isinstance(step, dict) and step.get("close"):
                return
            if isinstance(step, dict) and "raw" in step:
                conn.sendall(step["raw"].encode("utf-8"))
                continue
            if isinstance(step, str):
                request, reply = self.exchanges[step]
                label = step
            else:
                request, reply = step["request"], step["reply"]
                label = "custom step"
            want = with_id(request, rid) + "\n"
            if line != want:
                self.problems.append(f"{label}: got {line!r}, want {want!r}")
            conn.sendall((with_id(reply, rid) + "\n").encode("utf-8"))


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--socket", required=True, help="socket path to listen on")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--steps", help="comma-separated exchange names")
    g.add_argument("--script", help="JSON file with a list of steps")
    p.add_argument("--fixtures", default=FIXTURES, help="fixture file (default: %(default)s)")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for a client")
    args = p.parse_args(argv)
    if args.steps is not None:
        steps: List[Any] = [s for s in args.steps.split(",") if s]
    else:
        with open(args.script, encoding="utf-8") as f:
            steps = json.load(f)
    fake = FakeDaemon(args.socket, steps, load_exchanges(args.fixtures), args.timeout)
    try:
        problems = fake.start().join()
    finally:
        try:
            os.unlink(args.socket)
        except FileNotFoundError:
            pass
    for problem in problems:
        print(f"fake_daemon: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
