"""Tests of the reconfigurable-application calls and AppRuntime of
atoll_client against the fake daemon (every request line checked byte for
byte against clients/fixtures/wire.json), on a fake clock.

Run against the installed package (pip install clients/python), from
outside the source tree: python3 -m unittest discover -s clients/python/tests -v
(clients/test.sh does it in a fresh virtual environment).
"""

from __future__ import annotations

import json
import os
import unittest

from atoll_client import (
    AppRuntime,
    Assignment,
    AtollError,
    ProtocolError,
    Step,
    load_recipe,
    normalize_recipe,
    parse_recipe,
)
from test_atoll_client import EXCHANGES, FakeDaemonTest

RECIPE_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "recipes", "awm_parallel.toml")
REASON = "priority level 0 needs the room"


def reply_ok(name: str) -> dict:
    """The ``ok`` object of a fixture exchange's reply."""
    return json.loads(EXCHANGES[name][1])["ok"]


class FakeClock:
    """Time that moves only when told to, or slept on."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps = 0

    def __call__(self) -> float:
        return self.now

    def sleep(self, d: float) -> None:
        self.now += d
        self.sleeps += 1


class AppCallsTest(FakeDaemonTest):
    def test_register_poll_report_done_and_apps(self) -> None:
        c = self.serve(
            "app_register_named",
            "app_register_pid",
            "app_register_inline",
            "app_poll_first",
            "app_poll_up",
            "app_poll_waiting",
            "app_report_2",
            "app_report_no_goal",
            "app_done",
            "apps",
        )
        app, a = c.app_register("awm_parallel")
        self.assertEqual(app, 7)
        self.assertEqual(
            a,
            Assignment(7, 1, "running", 1, "t2", "b", 2.0, "0-7", 2, 0),
        )
        self.assertEqual(a.parallelism, 2)
        self.assertEqual(c.last_text, "app 7 (generation 1): mode 1 (t2) on island b: 2 CPUs' time on CPUs 0-7, 2 threads")
        self.assertEqual(c.app_register("awm_parallel", pid=4242)[0], 7)
        self.assertEqual(c.app_register(load_recipe(RECIPE_FILE))[1].generation, 1)
        self.assertEqual(c.app_poll(7).generation, 1)
        up = c.app_poll(7, after=1)
        self.assertEqual((up.generation, up.mode, up.parallelism), (2, 2, 4))
        w = c.app_poll(7, after=2)
        self.assertFalse(w.running)
        self.assertEqual((w.state, w.reason, w.parallelism, w.mode), ("waiting", REASON, 0, None))
        self.assertEqual(str(w), f"app 7 (generation 3): waiting: {REASON}")
        self.assertEqual(c.app_report(7, 2, 30), 0.25)
        self.assertEqual(c.app_report(7, 10), 0.0)
        self.assertIsNone(c.app_done(7))
        apps = c.apps()
        self.assertEqual([(x["app"], x["name"], x["goal_gap"]) for x in apps], [(7, "awm_parallel", 0.25)])
        self.finish(c)

    def test_daemon_errors_and_odd_replies(self) -> None:
        bad_app = dict(reply_ok("app_poll_same"), app=9)
        c = self.serve(
            "app_register_unknown",
            "app_poll_not_found",
            {"raw": json.dumps({"v": 1, "id": 3, "ok": bad_app}) + "\n"},
            {"raw": '{"v":1,"id":4,"ok":{"kind":"app_assignment","app":7,"generation":1,"state":"dancing"}}\n'},
            {"raw": '{"v":1,"id":5,"ok":{"kind":"app_reported","app":7}}\n'},
        )
        with self.assertRaises(AtollError) as e:
            c.app_register("nosuch")
        self.assertEqual((e.exception.code, e.exception.message), ("not_found", "no recipe named nosuch"))
        with self.assertRaises(AtollError) as e:
            c.app_poll(9)
        self.assertEqual(e.exception.code, "not_found")
        with self.assertRaisesRegex(ProtocolError, "about application 9, asked about 7"):
            c.app_poll(7, after=1)
        with self.assertRaisesRegex(ProtocolError, "not an assignment"):
            c.app_poll(7)
        with self.assertRaisesRegex(ProtocolError, "without a goal_gap"):
            c.app_report(7, 1)
        self.finish(c)

    def test_bad_arguments_send_nothing(self) -> None:
        c = self.serve()
        good = load_recipe(RECIPE_FILE)
        for call in (
            lambda: c.app_register("a b"),
            lambda: c.app_register(dict(good, color="red")),
            lambda: c.app_register(dict(good, modes=[])),
            lambda: c.app_register("awm_parallel", pid=0),
            lambda: c.app_poll(-1),
            lambda: c.app_poll(7, after=True),
            lambda: c.app_report(7, -1),
            lambda: c.app_report(7, 1, goal_cps=0),
            lambda: c.app_report(7, 1, goal_cps=float("nan")),
            lambda: c.app_done("7"),
        ):
            with self.assertRaises(ValueError):
                call()
        self.finish(c)
        self.assertEqual(self.fake.received, [])


class RecipeTest(unittest.TestCase):
    def test_the_sample_recipe_encodes_as_the_rust_client_sends_it(self) -> None:
        # The register request of the fixture carries the recipe as Rust
        # encodes it; the Python recipe, normalized, is that object.
        sent = json.loads(EXCHANGES["app_register_inline"][0])["recipe"]["inline"]
        with open(RECIPE_FILE, encoding="utf-8") as f:
            text = f.read()
        self.assertEqual(parse_recipe(text), sent)
        self.assertEqual(parse_recipe("  " + json.dumps(sent)), sent)
        self.assertEqual([m["needs"]["threads"] for m in sent["modes"]], [1, 2, 4, 8])

    def test_defaults_are_filled_and_mistakes_named(self) -> None:
        r = normalize_recipe({"name": "x", "modes": [{"id": 3, "value": 1, "needs": {"cpu_quota": 2}}]})
        self.assertEqual(
            r,
            {
                "name": "x",
                "priority": 0,
                "modes": [
                    {
                        "id": 3,
                        "name": "",
                        "value": 1.0,
                        "needs": {
                            "cpu_quota": 2.0,
                            "threads": None,
                            "exclusive_cpus": False,
                            "memory_bytes": 0,
                            "islands": None,
                        },
                    }
                ],
            },
        )
        mode = {"id": 0, "value": 0.5, "needs": {"cpu_quota": 1.0}}
        for bad, words in (
            ({"name": "x", "modes": [dict(mode, value=1.5)]}, "mode 0: value = 1.5"),
            ({"name": "x", "modes": [mode, mode]}, "modes[1].id = 0: already used"),
            ({"name": "x", "modes": [dict(mode, needs={"cpu_quota": 0})]}, "needs.cpu_quota = 0"),
            ({"name": "x", "modes": [dict(mode, needs={"cpu_quota": 1, "cpus": 2})]}, "unknown field 'cpus'"),
            ({"name": "x", "modes": [dict(mode, needs={"cpu_quota": 1, "threads": 0})]}, "needs.threads 0"),
            ({"name": "x", "modes": [dict(mode, needs={"cpu_quota": 1, "islands": []})]}, "needs.islands"),
            ({"name": "x", "priority": 256, "modes": [mode]}, "priority 256"),
            ({"name": "x/y", "modes": [mode]}, "recipe name 'x/y'"),
        ):
            with self.assertRaises(ValueError) as e:
                normalize_recipe(bad)
            self.assertIn(words, str(e.exception))


class RuntimeTest(FakeDaemonTest):
    def runtime(self, c, recipe, clock: FakeClock, **kw) -> AppRuntime:
        return AppRuntime(c, recipe, clock=clock, sleep=clock.sleep, **kw)

    def test_steps_follow_the_assignments_and_block_while_waiting(self) -> None:
        c = self.serve(
            "app_register_named",
            "app_poll_up",
            "app_poll_waiting",
            "app_poll_resumed",
            "app_report_2",
            "app_done",
        )
        clock = FakeClock()
        rt = self.runtime(c, "awm_parallel", clock, goal_cps=30.0, poll_every=0.1, report_every=10.0)
        step = rt.next_step()
        self.assertEqual((step.kind, step.assignment.mode), ("configure", 1))
        self.assertEqual(rt.next_step(), Step("run"))  # no poll before 0.1 s
        rt.cycles_done()
        clock.now = 0.1
        step = rt.next_step()
        self.assertEqual((step.kind, step.assignment.parallelism), ("configure", 4))
        clock.now = 0.2
        step = rt.next_step()
        self.assertEqual((step.kind, step.reason), ("suspend", REASON))
        self.assertIsNone(rt.grant)
        # Blocks: one pause, one poll, resumed in mode 0.
        step = rt.next_step()
        self.assertEqual((step.kind, step.assignment.mode, clock.sleeps), ("configure", 0, 1))
        self.assertEqual(rt.grant.mode, 0)
        self.assertEqual(rt.next_step().kind, "run")
        rt.cycles_done()
        s = rt.done()
        self.assertEqual((s.cycles, s.configurations, s.suspensions, s.polls, s.reports), (2, 3, 1, 3, 1))
        self.assertEqual(s.goal_gap, 0.25)
        self.finish(c)

    def test_run_calls_back_in_the_papers_order(self) -> None:
        c = self.serve("app_register_inline", "app_poll_same", "app_report_no_goal", "app_done")
        clock = FakeClock()
        events = []

        class App:
            left = 10

            def setup(self):
                events.append("setup")

            def configure(self, a):
                events.append(f"configure {a.mode}")

            def run(self):
                if self.left == 0:
                    return False
                if self.left > 7:
                    clock.now += 0.04  # 3 cycles of 40 ms, then time stands
                self.left -= 1
                return True

            def monitor(self, rt):
                events.append(f"monitor {rt.cycles}")

            def release(self):
                events.append("release")

        rt = self.runtime(c, load_recipe(RECIPE_FILE), clock, poll_every=0.1, report_every=100.0)
        s = rt.run(App())
        self.assertEqual(events, ["setup", "configure 1"] + [f"monitor {i}" for i in range(1, 11)] + ["release"])
        self.assertEqual((s.cycles, s.polls, s.reports, s.configurations), (10, 1, 1, 1))
        self.finish(c)

    def test_stop_releases_and_the_context_says_done(self) -> None:
        c = self.serve("app_register_named", "app_done")
        clock = FakeClock()
        with self.runtime(c, "awm_parallel", clock) as rt:
            self.assertEqual(rt.next_step().kind, "configure")
            rt.stop()
            clock.now = 5.0
            self.assertEqual(rt.next_step(), Step("release"))
        self.finish(c)
        with self.assertRaises(ValueError):
            AppRuntime(c, "awm_parallel", goal_cps=-1)


if __name__ == "__main__":
    unittest.main()
