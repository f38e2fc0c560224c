"""Tests of atoll_client against a fake daemon thread on a temp socket.

The fake checks every request line byte for byte against the exchanges of
clients/fixtures/wire.json, which are generated from the daemon's Rust
types, and answers with their canned replies.

Run against the installed package (pip install clients/python), from
outside the source tree: python3 -m unittest discover -s clients/python/tests -v
(clients/test.sh does it in a fresh virtual environment).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import io
import json
import os
import shutil
import tempfile
import threading
import time
import unittest

import atoll_client
import atoll_client.client
import atoll_client.runtime
from atoll_client import Ack, AtollError, Client, Nack, ProtocolError, Reported
import fake_daemon
from fake_daemon import FakeDaemon, load_exchanges

EXCHANGES = load_exchanges()


class FakeDaemonTest(unittest.TestCase):
    """Each test gets a temp dir; `serve` starts a fake daemon in it."""

    def setUp(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="atoll-py-")
        self.path = os.path.join(self.dir, "atoll.sock")
        self.fake = None

    def tearDown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def serve(self, *steps) -> Client:
        self.fake = FakeDaemon(self.path, list(steps), EXCHANGES, timeout=10.0).start()
        return Client(self.path, timeout=10.0)

    def finish(self, client: Client) -> None:
        """Closes the client and fails with every problem the fake saw."""
        client.close()
        self.assertEqual(self.fake.join(), [])


class CoordinationTest(FakeDaemonTest):
    def test_tune_ack_and_nack_are_results(self) -> None:
        c = self.serve("tune_ack", "tune_nack", "tune_at_capacity")
        r = c.tune("shop", "api", "cpu_time", "up")
        self.assertIsInstance(r, Ack)
        self.assertTrue(r)
        self.assertEqual(r.effects[0]["change"]["weight"], 125)
        self.assertEqual(r.text, "ack: set weight of web/api to 125: overlay shop asked to tune CPU time up")
        self.assertEqual(c.last_text, r.text)
        r = c.tune("shop", "api", resource="memory", dir="down")
        self.assertIsInstance(r, Nack)
        self.assertFalse(r)
        self.assertEqual(r.kind, "at_minimum")
        self.assertEqual(r.reason, {"nack": "at_minimum", "unit": "api", "resource": "memory"})
        self.assertEqual(r.text, "nack: unit api is already at its minimum memory")
        r = c.tune("shop", "api")
        self.assertEqual(r.reason["limit"], {"limit": "max_weight", "weight": 10000})
        self.finish(c)

    def test_trigger(self) -> None:
        c = self.serve("trigger_ack")
        r = c.trigger("shop", "api")
        self.assertTrue(r.acked)
        self.assertEqual(r.effects[0]["change"]["change"], "boost")
        self.finish(c)

    def test_borrow_and_release_pick_message_and_sender(self) -> None:
        c = self.serve("borrow_any_ack", "borrow_preferred_nack", "release_ack")
        r = c.borrow("shop")
        self.assertTrue(r)
        self.assertEqual(r.effects[0]["change"]["cpus"], "3")
        r = c.borrow("shop", 2, island="db", into="web")
        self.assertEqual(r.reason, {"nack": "no_idle_capacity", "island": "db"})
        self.assertTrue(c.release("shop", "db", into="web"))
        self.finish(c)

    def test_register_deregister_and_any_message(self) -> None:
        c = self.serve("register_ack", "deregister_ack", "null_ack")
        spec = {
            "name": "batch",
            "priority": 1,
            "units": [("db", "etl")],
            "property": {"kind": "throughput_floor", "per_s": 100.0},
        }
        r = c.register(spec)
        self.assertTrue(r)
        self.assertEqual(r.effects, [])
        self.assertEqual(r.text, "ack")
        self.assertTrue(c.deregister("batch"))
        self.assertTrue(c.coordinate({"msg": "null"}, from_island="web"))
        self.finish(c)

    def test_daemon_errors_raise_atoll_error(self) -> None:
        c = self.serve("tune_shutting_down", "report_not_found")
        with self.assertRaises(AtollError) as e:
            c.tune("shop", "api")
        self.assertEqual(e.exception.code, "shutting_down")
        with self.assertRaises(AtollError) as e:
            c.report("nosuch", 1)
        self.assertEqual((e.exception.code, e.exception.message), ("not_found", "no overlay nosuch"))
        self.finish(c)


class ReportAndQueriesTest(FakeDaemonTest):
    def test_report_holds_and_not(self) -> None:
        c = self.serve("report_holds", "report_not_holding")
        self.assertEqual(c.report("shop", 1234.5), Reported("shop", True, None))
        # An int is sent as the float the daemon's type holds (7500.0).
        r = c.report("shop", 7500)
        self.assertFalse(r.holds)
        self.assertTrue(r.action.startswith("tune CPU time up for unit api of overlay shop: ack"))
        self.finish(c)

    def test_overlays_and_status(self) -> None:
        c = self.serve("overlays", "status")
        overlays = c.overlays()
        self.assertEqual([o["name"] for o in overlays], ["shop"])
        self.assertEqual(overlays[0]["property"]["bound_us"], 5000)
        self.assertEqual(overlays[0]["nacks"], [["cpu_time", 2]])
        status = c.status()
        self.assertNotIn("kind", status)
        self.assertEqual(status["islands"][0]["name"], "web")
        self.assertEqual(status["units"][0]["pids"], [4242])
        self.finish(c)


class ClientSideTest(FakeDaemonTest):
    def test_bad_arguments_send_nothing(self) -> None:
        c = self.serve()
        for call in (
            lambda: c.tune("shop", "api", resource="gpu"),
            lambda: c.tune("shop", "api", dir="sideways"),
            lambda: c.tune("shop", "web/api"),
            lambda: c.trigger("", "api"),
            lambda: c.borrow("shop", -1),
            lambda: c.borrow("shop", True),
            lambda: c.release("shop", None),
            lambda: c.report("shop", float("nan")),
            lambda: c.report("shop", float("inf")),
            lambda: c.coordinate({"resource": "cores"}),
            lambda: c.register({"name": "a b"}),
            lambda: c.tune("shop", "api", from_island="-x"),
        ):
            with self.assertRaises(ValueError):
                call()
        self.finish(c)
        self.assertEqual(self.fake.received, [])

    def test_the_fake_catches_a_wrong_request(self) -> None:
        # Guards the tests: a request that differs from the fixture is seen.
        c = self.serve("tune_ack")
        c.tune("shop", "db")
        c.close()
        problems = self.fake.join()
        self.assertEqual(len(problems), 1)
        self.assertIn('"unit":"db"', problems[0])

    def test_stale_replies_are_skipped_and_odd_ones_refused(self) -> None:
        stale = '{"v":1,"id":1,"ok":{"kind":"stopping"}}\n'
        c = self.serve(
            "report_holds",
            {"raw": stale + '{"v":1,"id":2,"ok":{"kind":"reported","overlay":"shop","holds":true,"x":1}}\n'},
            {"raw": '{"v":1,"id":9,"ok":{"kind":"reported"}}\n'},
        )
        self.assertTrue(c.report("shop", 1234.5).holds)
        self.assertTrue(c.report("shop", 1.0).holds)  # unknown fields are ignored
        with self.assertRaises(ProtocolError):
            c.report("shop", 1.0)
        self.finish(c)

    def test_wrong_kind_garbage_and_hangup(self) -> None:
        c = self.serve(
            {"raw": '{"v":1,"id":1,"ok":{"kind":"stopping"}}\n'},
            {"raw": "not json\n"},
            {"close": True},
        )
        with self.assertRaises(ProtocolError):
            c.trigger("shop", "api")
        with self.assertRaises(ProtocolError):
            c.overlays()
        with self.assertRaises(ConnectionError):
            c.overlays()
        self.finish(c)

    def test_answers_without_text_get_words(self) -> None:
        ack = '{"v":1,"id":1,"ok":{"kind":"coordinated","reply":{"reply":"ack","effects":[]},"text":""}}\n'
        nack = '{"v":1,"id":2,"ok":{"kind":"coordinated","reply":{"reply":"nack","reason":{"nack":"zero_amount"}}}}\n'
        c = self.serve({"raw": ack}, {"raw": nack})
        self.assertEqual(c.coordinate({"msg": "null"}).text, "ack")
        r = c.borrow("shop", 0)
        self.assertEqual((r.kind, r.text), ("zero_amount", "nack: zero_amount"))
        self.finish(c)

    def test_no_daemon(self) -> None:
        with self.assertRaises(OSError):
            Client(os.path.join(self.dir, "none.sock"))

    def test_ids_count_up_per_connection(self) -> None:
        c = self.serve("report_holds", "report_holds")
        c.report("shop", 1234.5)
        c.report("shop", 1234.5)
        self.finish(c)
        self.assertEqual([line[:14] for line in self.fake.received], ['{"v":1,"id":1,', '{"v":1,"id":2,'])

    def test_defaults_match_the_daemon(self) -> None:
        self.assertEqual(atoll_client.DEFAULT_SOCKET, "/run/atoll/atoll.sock")
        self.assertEqual(atoll_client.PROTOCOL_VERSION, 1)


class InstalledPackageTest(unittest.TestCase):
    """These tests are meant to run against the installed package, typed."""

    def test_the_installed_distribution_is_the_one_imported(self) -> None:
        # Fails when atoll_client comes from the source tree (no metadata)
        # or from another installation than the one imported.
        dist = importlib.metadata.distribution("atoll-client")
        self.assertEqual(dist.version, atoll_client.__version__)
        files = {os.path.realpath(dist.locate_file(f)) for f in dist.files or ()}
        for module in (atoll_client, atoll_client.client, atoll_client.runtime):
            self.assertIn(os.path.realpath(module.__file__), files)

    def test_it_says_it_is_typed(self) -> None:
        marker = os.path.join(os.path.dirname(atoll_client.__file__), "py.typed")
        self.assertTrue(os.path.isfile(marker), marker)


class FakeDaemonProgramTest(unittest.TestCase):
    def test_script_file_and_exit_status(self) -> None:
        # The program form, as clients/test.sh runs it: a script of steps;
        # exit status 0 only if every request was as expected.
        d = tempfile.mkdtemp(prefix="atoll-py-")
        self.addCleanup(shutil.rmtree, d, True)
        script = os.path.join(d, "steps.json")
        with open(script, "w", encoding="utf-8") as f:
            json.dump(["report_holds", {"close": True}], f)
        for value, want in ((1234.5, 0), (99.0, 1)):
            sock = os.path.join(d, "s%d.sock" % want)
            result = []
            argv = ["--socket", sock, "--script", script, "--timeout", "10"]
            t = threading.Thread(target=lambda: result.append(fake_daemon.main(argv)))
            t.start()
            while t.is_alive() and not os.path.exists(sock):
                time.sleep(0.01)
            stderr = io.StringIO()
            with contextlib.redirect_stderr(stderr):
                with Client(sock, timeout=10.0) as c:
                    c.report("shop", value)
                    with self.assertRaises(ConnectionError):
                        c.report("shop", value)
                t.join()
            self.assertEqual(result, [want], stderr.getvalue())
            self.assertFalse(os.path.exists(sock), "the program removes its socket")


if __name__ == "__main__":
    unittest.main()
