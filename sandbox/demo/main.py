"""``fleetgate demo``: start the world, play the job mix and the failure, print the summary.

The loop runs in real time and reads the simulated time off the scaled clock: it submits the
jobs whose arrival has come, injects and lifts the cluster failure when due, samples the API
(bindings, Clusters) and the reconciler's latest cycle, and redraws. It ends when every job
has finished (or was refused by the API), or at ``--timeout`` real seconds.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes.client.exceptions import ApiException
from rich.console import Console
from rich.live import Live
from rich.text import Text

from engine.cycle import Action
from engine.cycle import JobState as RecordState
from sandbox.demo.failure import Failure, rescheduling_available
from sandbox.demo.jobs import ARRIVAL_WINDOW, PlannedJob, by_tenant, plan
from sandbox.demo.observe import FINISHED, JobState, Tracker
from sandbox.demo.render import View, summary_tables
from sandbox.demo.screenshots import ScreenshotError, take
from sandbox.demo.submit import create
from sandbox.demo.summary import build
from sandbox.demo.world import DemoError, World, started

FAILURE_AT = 0.4 * ARRIVAL_WINDOW  # simulated seconds after the start
FAILURE_FOR = 900.0  # simulated seconds the cluster stays down
PROGRESS_EVERY = 300.0  # simulated seconds between plain progress lines
REFRESH = {True: 0.5, False: 0.25}  # real seconds between samples: plain, live
PLAIN_WIDTH = 120
SETTLE = 3.0  # real seconds to wait for the last decisions when time is up
RB = ("work.karmada.io", "v1alpha2", "resourcebindings")
CLUSTERS = ("cluster.karmada.io", "v1alpha1", "clusters")
EXIT_OK, EXIT_FAILED = 0, 1  # as sandbox/demo/__init__.py documents them (2: usage, argparse)


def main(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.ERROR, format="%(levelname)s %(name)s: %(message)s")
    plain = args.plain or not sys.stdout.isatty()
    as_json = args.output == "json"
    console = _console(plain, stderr=as_json)
    planned = plan(args.jobs, args.seed)
    began = time.monotonic()
    try:
        with (
            tempfile.TemporaryDirectory(prefix="fleetgate-demo-") as workdir,
            started(args.speed, Path(workdir)) as world,
        ):
            demo = Demo(world, planned, console, plain, args.timeout, args.screenshots)
            summary = demo.run(args.seed, args.speed, began)
    except (DemoError, OSError, ApiException, ScreenshotError) as error:
        print(f"fleetgate demo: cannot run: {error}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("fleetgate demo: interrupted; everything was stopped", file=sys.stderr)
        return EXIT_FAILED
    if as_json:
        print(json.dumps(summary, indent=2))
    else:
        out = _console(plain)
        for part in summary_tables(summary):
            out.print(part, soft_wrap=isinstance(part, Text))
    return EXIT_FAILED if summary["jobs"]["lost"] else EXIT_OK


class Demo:
    def __init__(
        self,
        world: World,
        jobs: list[PlannedJob],
        console: Console,
        plain: bool,
        timeout: float,
        screenshots: Path | None = None,
    ) -> None:
        self.world = world
        self.screenshots = screenshots  # taken once, then None
        self.jobs = jobs
        self.console = console
        self.plain = plain
        self.timeout = timeout
        self.tracker = Tracker(jobs)
        self.view = View(self.tracker, world.clock.speed)
        self.failure = Failure(FAILURE_AT, FAILURE_FOR)
        self._reported: dict[str, JobState] = {}
        self._next_line = 0.0
        self._start = 0.0

    def run(self, seed: int, speed: float, began: float) -> dict[str, Any]:
        clock = self.world.clock
        start = self._start = clock.monotonic()
        started = clock.now()
        mix = ", ".join(f"{tenant} {n}" for tenant, n in by_tenant(self.jobs))
        self._say(
            f"fleetgate demo: {len(self.jobs)} jobs ({mix}), seed {seed}, {speed:g}× real "
            f"time; {', '.join(sorted(self.world.karmada.fleet))}; policies "
            f"{self.world.policies.current.version}"
        )
        self._say(f"dashboard: {self.world.dashboard} (while the demo runs)")
        if self.plain:
            stopped = self._loop(start, began, lambda: None)
        else:
            with Live(self.view.live(0), console=self.console, auto_refresh=False) as live:
                stopped = self._loop(
                    start, began, lambda: live.update(self._live(start), refresh=True)
                )
        simulated = clock.monotonic() - start
        return build(
            self.tracker,
            self.failure,
            self.world.policies.current,
            seed=seed,
            speed=speed,
            simulated=simulated,
            wall=time.monotonic() - began,
            stopped=stopped,
            started=started,
        )

    def _live(self, start: float) -> Any:
        return self.view.live(self.world.clock.monotonic() - start)

    def _loop(self, start: float, began: float, redraw: Callable[[], None]) -> str:
        clock, submitted = self.world.clock, 0
        deadline = began + self.timeout
        settle_until: float | None = None
        while True:
            elapsed = clock.monotonic() - start
            while submitted < len(self.jobs) and self.jobs[submitted].at <= elapsed:
                self._submit(self.jobs[submitted])
                submitted += 1
            self._observe()
            elapsed = clock.monotonic() - start
            self._failure(elapsed)
            self._report(clock.monotonic() - start)
            self._shoot(final=False)
            redraw()
            if submitted == len(self.jobs) and self._all_done():
                self._shoot(final=True)
                return "every job finished"
            if time.monotonic() >= deadline:
                if settle_until is None:  # time is up: let the last decisions land
                    settle_until = time.monotonic() + SETTLE
                elif time.monotonic() >= settle_until:
                    return f"timeout after {self.timeout:g} s"
            time.sleep(REFRESH[self.plain])

    def _shoot(self, final: bool) -> None:
        """The dashboard's screenshots, once some jobs run while others wait (or at the end),
        the Job page showing a waiting job's reason (or any job's)."""
        result = self.world.reconciler.last_result
        if self.screenshots is None or result is None:
            return
        waiting = [d for d in result.decisions if d.action == Action.PENDING]
        running = result.jobs.in_state(RecordState.ADMITTED)
        if not final and not (waiting and len(running) >= 2):
            return
        waiting.sort(key=lambda d: -(d.position or 0))  # the last in its queue waits longest
        shown = [d.workload for d in waiting] + [r.workload for r in running]
        job = (
            "/".join(shown[0].split("/")[1:])
            if shown
            else f"{self.jobs[0].namespace}/{self.jobs[0].name}"  # all done: its page says so
        )
        written = take(self.world.dashboard, job, self.screenshots)
        self.screenshots = None
        self._event(f"screenshots: {', '.join(str(p) for p in written)}")

    def _submit(self, job: PlannedJob) -> None:
        self.tracker.submitted[job.binding] = self.world.clock.now()
        refusal = create(self.world.api, job.template)
        if refusal is not None:
            del self.tracker.submitted[job.binding]
            self.tracker.refused[job.binding] = refusal
            self._event(f"{job.namespace}/{job.name} refused by the API: {refusal}")

    def _observe(self) -> None:
        custom = self.world.custom
        try:
            bindings = custom.list_cluster_custom_object(*RB)["items"]
            clusters = custom.list_cluster_custom_object(*CLUSTERS)["items"]
        except (ApiException, OSError) as error:
            logging.getLogger("fleetgate.demo").warning("listing failed: %s", error)
            return
        now = self.world.clock.now()
        self.tracker.observe(now, bindings, clusters, self.world.reconciler.last_result)

    def _all_done(self) -> bool:
        t = self.tracker
        return all(t.state(job).state in FINISHED | {"refused"} for job in self.jobs)

    def _failure(self, elapsed: float) -> None:
        failure, faults = self.failure, self.world.faults
        now = self.world.clock.now()

        def runs(cluster: str) -> set[tuple[str, str]]:
            return self.world.karmada.running_at(cluster, now)

        target = failure.target(self.tracker, runs) if failure.due(elapsed) else None
        if target is not None:
            failure.inject(faults, self.tracker, target, now, elapsed, runs)
            how = (
                "fleetgate requeues its jobs once it has not been Ready for clusterNotReadyGrace"
                if rescheduling_available()
                else "this reconciler has no failure requeue: its jobs stay placed there"
            )
            self._event(
                f"FAULT: {target} unreachable (its agent stops reporting); "
                f"{len(failure.affected)} jobs running there; {how}"
            )
            self._reported = {ref: self.tracker.states[ref] for ref in failure.affected}
        elif failure.recovery_due(elapsed):
            failure.recover(faults, self.world.clock.now())
            self._event(f"RECOVERED: {failure.cluster} reports again")
        for ref, before in list(self._reported.items()):
            state = self.tracker.states.get(ref, before)
            if (state.state, state.clusters, state.reason) != (
                before.state,
                before.clusters,
                before.reason,
            ):
                self._reported[ref] = state
                self._event(f"{ref}: {_describe(state)}")

    def _report(self, elapsed: float) -> None:
        if self.plain and elapsed >= self._next_line:
            self._say(self.view.progress_line(elapsed))
            self._next_line = (elapsed // PROGRESS_EVERY + 1) * PROGRESS_EVERY

    def _event(self, text: str) -> None:
        line = self.view.event(self.world.clock.monotonic() - self._start, text)
        if self.plain:
            self._say(line)

    def _say(self, text: str) -> None:
        self.console.print(text, highlight=False, markup=False, soft_wrap=True)


def _console(plain: bool, *, stderr: bool = False) -> Console:
    """A console for the live view, or for plain text at least ``PLAIN_WIDTH`` wide (logs and
    pipes have no width of their own)."""
    if not plain:
        return Console(stderr=stderr, highlight=False)
    width = max(PLAIN_WIDTH, shutil.get_terminal_size((PLAIN_WIDTH, 24)).columns)
    return Console(stderr=stderr, highlight=False, force_terminal=False, width=width)


def _describe(state: JobState) -> str:
    if state.state == "running":
        return f"running on {','.join(state.clusters)}"
    if state.state == "pending":
        return f"pending: {state.reason}: {state.message}"
    return state.state
