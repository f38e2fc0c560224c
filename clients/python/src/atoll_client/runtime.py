"""The execution loop of a reconfigurable application (BarbequeRTRM) over
:class:`~atoll_client.Client`: :class:`AppRuntime`."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Dict, Optional, Tuple, Union

from .client import Assignment, Client, _int, _number

__all__ = ["Step", "RuntimeSummary", "AppRuntime"]

@dataclass(frozen=True)
class Step:
    """What an application should do now (:meth:`AppRuntime.next_step`)."""

    #: ``"configure"`` (adapt to ``assignment``: first grant, new one, or a
    #: resumption), ``"run"`` (one cycle, then :meth:`AppRuntime.cycles_done`),
    #: ``"suspend"`` (stop working; the next step blocks until resumed) or
    #: ``"release"`` (stopped: release, then :meth:`AppRuntime.done`).
    kind: str
    #: The assignment, for ``configure`` and ``suspend``.
    assignment: Optional[Assignment] = None

    @property
    def reason(self) -> str:
        """Why, for ``suspend``."""
        return self.assignment.reason if self.assignment else ""


@dataclass(frozen=True)
class RuntimeSummary:
    """What an :class:`AppRuntime` did."""

    app: int
    cycles: int
    configurations: int
    suspensions: int
    polls: int
    reports: int
    goal_gap: Optional[float]


class AppRuntime:
    """A registered application and the paper's execution loop.

    Each :meth:`next_step` polls at most every ``poll_every`` seconds (with
    the generation last acted on), reports the cycles counted and the goal
    at most every ``report_every`` seconds when either changed, and turns a
    new assignment into a ``configure`` or ``suspend`` step (a new
    generation of the state already acted on is not news). While the
    application waits it blocks, polling every ``poll_every``, until
    resumed or stopped. :meth:`stop` (from any thread) makes the next step
    ``release``. ``clock`` and ``sleep`` are injectable for tests. Used as a
    context manager, it says done on exit if :meth:`done` was not called.
    """

    def __init__(
        self,
        client: Client,
        recipe: Union[str, Dict[str, Any]],
        pid: Optional[int] = None,
        goal_cps: Optional[float] = None,
        poll_every: float = 0.1,
        report_every: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self._check_goal(goal_cps)
        self.client = client
        self.goal_cps = goal_cps
        self.poll_every = poll_every
        self.report_every = report_every
        self._clock, self._sleep = clock, sleep
        self.app, self.assignment = client.app_register(recipe, pid)
        self._acted: Optional[Assignment] = None
        self.cycles = 0
        self._reported: Tuple[int, Optional[float]] = (0, None)
        self.goal_gap: Optional[float] = None
        self._last_poll = self._last_report = clock()
        self._stopped = self._finished = False
        self._counts = {"configurations": 0, "suspensions": 0, "polls": 0, "reports": 0}

    @staticmethod
    def _check_goal(goal_cps: Optional[float]) -> None:
        if goal_cps is not None:
            _number("goal_cps", goal_cps, lambda v: v > 0, "must be above 0")

    def __enter__(self) -> "AppRuntime":
        return self

    def __exit__(self, *exc: Any) -> None:
        if not self._finished:
            try:
                self.client.app_done(self.app)
                self._finished = True
            except (OSError, AtollError, ProtocolError):
                pass

    def stop(self) -> None:
        """Makes the next step (or the wait while suspended) ``release``."""
        self._stopped = True

    def cycles_done(self, n: int = 1) -> None:
        """Counts ``n`` more cycles (reported at the next report)."""
        self.cycles += _int("n", n, 0, 2**63)

    def set_goal_cps(self, goal_cps: Optional[float]) -> None:
        """Changes the goal, reported at the next report."""
        self._check_goal(goal_cps)
        self.goal_cps = goal_cps

    @property
    def grant(self) -> Optional[Assignment]:
        """The assignment last configured for (``None`` while suspended)."""
        return self._acted if self._acted is not None and self._acted.running else None

    def _poll(self) -> None:
        after = self._acted.generation if self._acted is not None else None
        self.assignment = self.client.app_poll(self.app, after)
        self._last_poll = self._clock()
        self._counts["polls"] += 1

    def _report(self) -> None:
        self._last_report = self._clock()
        key = (self.cycles, self.goal_cps)
        if key == self._reported:
            return
        self.goal_gap = self.client.app_report(self.app, self.cycles, self.goal_cps)
        self._reported = key
        self._counts["reports"] += 1

    def _news(self) -> Optional[Step]:
        a, acted = self.assignment, self._acted
        if acted is not None and acted.generation == a.generation:
            return None
        self._acted = a
        if acted is not None and replace(acted, generation=a.generation) == a:
            return None
        if a.running:
            self._counts["configurations"] += 1
            return Step("configure", a)
        self._counts["suspensions"] += 1
        return Step("suspend", a)

    def next_step(self) -> Step:
        """What to do now (see the class docs); blocks while waiting."""
        if self._stopped:
            return Step("release")
        now = self._clock()
        if now - self._last_report >= self.report_every:
            self._report()
        if now - self._last_poll >= self.poll_every:
            self._poll()
        while True:
            step = self._news()
            if step is not None:
                return step
            if self._acted is not None and self._acted.running:
                return Step("run")
            self._sleep(max(self.poll_every, 0.001))
            if self._stopped:
                return Step("release")
            self._poll()

    def summary(self) -> RuntimeSummary:
        return RuntimeSummary(app=self.app, cycles=self.cycles, goal_gap=self.goal_gap, **self._counts)

    def done(self) -> RuntimeSummary:
        """Reports the cycles not reported yet, says done, returns the summary."""
        self._report()
        self.client.app_done(self.app)
        self._finished = True
        return self.summary()

    def run(self, app: Any) -> RuntimeSummary:
        """The execution loop with callbacks: ``app.setup()``, then
        ``app.configure(assignment)``, ``app.suspend(reason)``, ``app.run()``
        (one cycle; true while there was work, false when finished) and
        ``app.monitor(runtime)`` after each cycle, and ``app.release()`` at the
        end, then :meth:`done`. Missing methods other than ``configure`` and
        ``run`` are skipped."""
        call = lambda name, *a: getattr(app, name)(*a) if hasattr(app, name) else None  # noqa: E731
        call("setup")
        try:
            while True:
                step = self.next_step()
                if step.kind == "configure":
                    app.configure(step.assignment)
                elif step.kind == "suspend":
                    call("suspend", step.reason)
                elif step.kind == "run":
                    if not app.run():
                        break
                    self.cycles_done(1)
                    call("monitor", self)
                else:
                    break
            call("release")
            return self.done()
        finally:
            self.__exit__()
