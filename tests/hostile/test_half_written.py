"""No half-written policy goes live: a change loads once the files settle, and only if they stayed
the same while they were read.

Both reload paths are driven on real files: the webhook's poller (``webhook.poll.policy_poller``,
as ``fleetgate webhook`` wires it) and the engine's watcher (``PolicyWatcher``). Every version
made live is recorded by the holder. Each wait polls every 20 ms and gives up after
``tests.waiting.PATIENCE_S``; nothing is timed (how soon a change loads after it settles is
checked on injected clocks, at the end).
"""

from __future__ import annotations

import argparse
import shutil
import threading
import time
from collections.abc import Callable, Hashable
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from engine.errors import PolicyIssue, PolicyLoadError
from engine.policy.policyset import PolicySet, load_policy_set
from engine.policy.reload import PolicyHolder, PolicyWatcher, Settler, policy_fingerprint
from tests.conftest import REPO, configmap_volume, queue_doc
from tests.waiting import PATIENCE_S, eventually
from webhook import cli
from webhook.poll import Poller, policy_poller

SETTLE = 0.3
POLL_S = 0.02


class RecordingHolder(PolicyHolder):
    """A holder that records the version of every set it makes live."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.live: list[str] = []

    def reload(self, expected: Hashable | None = None) -> bool:
        swapped = super().reload(expected)
        if swapped:
            self.live.append(self.current.version)
        return swapped


Reloader = Callable[[PolicyHolder, Path, float], AbstractContextManager[object]]


def poller(holder: PolicyHolder, directory: Path, settle: float) -> AbstractContextManager[object]:
    return policy_poller(holder, POLL_S, settle)


def watcher(holder: PolicyHolder, directory: Path, settle: float) -> AbstractContextManager[object]:
    return PolicyWatcher(holder, [directory], settle=settle)


RELOADERS = pytest.mark.parametrize("reloader", [poller, watcher], ids=["poller", "watcher"])


def copy_policies(tmp_path: Path) -> Path:
    live = tmp_path / "policies"
    shutil.copytree(REPO / "policies", live, ignore=shutil.ignore_patterns("kustomization.yaml"))
    return live


def version_of(directory: Path, queues: str) -> str:
    """The version of ``directory``'s policies with ``queues`` as queues.yaml (restored after)."""
    path = directory / "queues.yaml"
    original = path.read_text()
    path.write_text(queues)
    try:
        return load_policy_set([directory]).version
    finally:
        path.write_text(original)


def wait_until(condition: Callable[[], bool], what: str, holder: PolicyHolder) -> None:
    eventually(condition, what=what, detail=lambda: holder.status)


@RELOADERS
def test_a_file_written_in_two_steps_goes_live_only_when_complete(tmp_path, reloader: Reloader):
    """The writer pauses 0.2 s between the steps: long enough for a reload without a settle
    interval to load the first step, 0.3 s short of the settle interval on busy cores."""
    live = copy_policies(tmp_path)
    queues = live / "queues.yaml"
    original = queues.read_text()
    half = original + "---\n" + queue_doc("late-a")  # valid, but Queue/late-b is missing
    rest = "---\n" + queue_doc("late-b")
    versions = {"half": version_of(live, half), "whole": version_of(live, half + rest)}
    holder = RecordingHolder.for_paths([live])
    assert holder.reload()
    first = holder.current.version

    def write_in_two_steps() -> None:
        with queues.open("w") as file:
            file.write(half)
            file.flush()
            time.sleep(0.2)
            file.write(rest)

    with reloader(holder, live, 0.5):
        writer = threading.Thread(target=write_in_two_steps, name="slow-writer")
        writer.start()
        writer.join(timeout=5)
        wait_until(lambda: holder.current.queue("late-b") is not None, "the whole file", holder)

    assert versions["half"] not in holder.live
    assert holder.live[0] == first
    assert set(holder.live) == {first, versions["whole"]}
    assert holder.current.version == versions["whole"]
    assert holder.status.failures == 0


@RELOADERS
def test_a_file_rewritten_during_the_read_is_discarded_and_read_again(tmp_path, reloader: Reloader):
    live = copy_policies(tmp_path)
    queues = live / "queues.yaml"
    original = queues.read_text()
    middle = original + "---\n" + queue_doc("middle")
    final = middle + "---\n" + queue_doc("final")
    versions = {"middle": version_of(live, middle), "final": version_of(live, final)}
    rewrite_during_next_load = threading.Event()

    def load() -> PolicySet:
        policies = load_policy_set([live])
        if rewrite_during_next_load.is_set():  # another write lands while the set is read
            rewrite_during_next_load.clear()
            queues.write_text(final)
        return policies

    holder = RecordingHolder(load, look=policy_fingerprint([live]))
    assert holder.reload()
    with reloader(holder, live, SETTLE):
        rewrite_during_next_load.set()
        queues.write_text(middle)
        wait_until(lambda: holder.current.queue("final") is not None, "the final file", holder)

    assert not rewrite_during_next_load.is_set(), "the rewrite never happened"
    assert versions["middle"] not in holder.live
    assert holder.current.version == versions["final"]
    status = holder.status
    assert status.retries >= 1
    assert (status.failures, status.healthy) == (0, True)


@RELOADERS
def test_a_configmap_swap_reloads_once_to_the_new_set(tmp_path, reloader: Reloader):
    files = {p.name: p.read_text() for p in sorted((REPO / "policies").glob("*.yaml"))}
    files.pop("kustomization.yaml", None)
    volume = configmap_volume(tmp_path / "policies", files, "2025_a")
    holder = RecordingHolder.for_paths([volume])
    assert holder.reload()
    first = holder.current.version
    assert files["queues.yaml"].count("  weight: 2\n") == 1  # Queue/research
    updated = {
        **files,
        "queues.yaml": files["queues.yaml"].replace("  weight: 2\n", "  weight: 3\n"),
    }

    with reloader(holder, volume, SETTLE):
        configmap_volume(volume, updated, "2025_b")
        wait_until(lambda: holder.current.version != first, "the swapped ConfigMap", holder)

    assert holder.live == [first, load_policy_set([volume]).version]  # one reload, the whole
    assert holder.current.queue("research").weight == 3


def test_ignored_events_do_not_hold_back_a_settled_change(tmp_path):
    """An editor's swap file written non-stop must not keep the watcher from reloading."""
    live = copy_policies(tmp_path)
    holder = RecordingHolder.for_paths([live])
    assert holder.reload()
    queues = live / "queues.yaml"
    stop = threading.Event()

    def scribble() -> None:  # longer than the wait below, unless stopped
        deadline = time.monotonic() + 2 * PATIENCE_S
        while not stop.is_set() and time.monotonic() < deadline:
            (live / ".queues.yaml.swp").write_text(str(time.monotonic()))
            time.sleep(0.01)

    scribbler = threading.Thread(target=scribble, name="swap-file-writer")
    with PolicyWatcher(holder, [live], settle=SETTLE):
        scribbler.start()
        try:
            queues.write_text(queues.read_text().replace("  weight: 2\n", "  weight: 3\n"))
            wait_until(lambda: holder.current.queue("research").weight == 3, "the edit", holder)
            still_scribbling = scribbler.is_alive()
        finally:
            stop.set()
            scribbler.join(timeout=5)
    assert still_scribbling, "reloaded only once the swap file stopped changing"


# --- the pieces alone: injected clocks and loads, no threads ---------------------------------

ISSUE = PolicyIssue("queues.yaml", 3, 1, "", "", "unexpected end of the stream")


class Files:
    """A fingerprint that the test changes by hand, and a load that can change it mid-read."""

    def __init__(self, policies: PolicySet) -> None:
        self.value = 1
        self.policies = policies
        self.during_load: Callable[[], None] = lambda: None
        self.loads = 0

    def look(self) -> int:
        return self.value

    def load(self) -> PolicySet:
        self.loads += 1
        self.during_load()
        return self.policies

    def change(self) -> None:
        self.value += 1


@pytest.fixture(scope="module")
def example_set() -> PolicySet:
    return load_policy_set([REPO / "policies"])


def test_a_read_during_which_the_files_change_is_discarded_not_failed(example_set):
    files = Files(example_set)
    holder = PolicyHolder(files.load, look=files.look)
    assert holder.reload()
    before = holder.status
    files.during_load = files.change
    assert holder.reload() is False
    status = holder.status
    assert status.retries == 1
    assert (status.reloads, status.failures, status.errors) == (before.reloads, 0, ())
    assert status.healthy
    assert status.last_attempt_at == before.last_attempt_at
    files.during_load = lambda: None
    assert holder.reload()
    assert holder.status.reloads == before.reloads + 1


def test_a_failed_read_of_files_being_written_is_a_retry_not_a_failure(example_set):
    files = Files(example_set)
    holder = PolicyHolder(files.load, look=files.look)
    assert holder.reload()

    def cut_off() -> None:
        files.change()
        raise PolicyLoadError([ISSUE])

    files.during_load = cut_off
    assert holder.reload() is False
    assert (holder.status.retries, holder.status.failures, holder.status.healthy) == (1, 0, True)


def test_files_that_changed_since_they_settled_are_not_read(example_set):
    files = Files(example_set)
    holder = PolicyHolder(files.load, look=files.look)
    settled = files.look()
    files.change()
    assert holder.reload(expected=settled) is False
    assert files.loads == 0
    assert holder.status.retries == 1
    assert holder.reload(expected=files.look())
    assert files.loads == 1


def test_the_poller_calls_only_once_the_value_has_settled():
    now = [0.0]
    value: list[object] = ["a"]
    calls: list[object] = []
    poller = Poller(
        lambda: value[0],
        lambda: calls.append(value[0]),
        60,
        "test",
        settle=0.3,
        clock=lambda: now[0],
    )
    timeline: list[tuple[float, object, bool]] = [
        (0.00, "b", False),  # changed: starts settling
        (0.20, "b", False),
        (0.25, "c", False),  # changed again: starts over
        (0.50, "c", False),
        (0.55, None, False),  # a file missing mid-swap: starts over
        (0.60, "d", False),
        (0.89, "d", False),
        (0.90, "d", True),
        (2.00, "d", False),  # nothing new
        (2.10, "a", False),
        (2.20, "d", False),  # back to what was handled: nothing to do
        (2.60, "d", False),
    ]
    for at, seen, fired in timeline:
        now[0], value[0] = at, seen
        assert poller.check() is fired, f"at {at}s with {seen!r}"
    assert calls == ["d"]
    assert poller.seen == "d"


def test_settler_without_an_interval_settles_at_once():
    settler = Settler(0.0, clock=lambda: 0.0)
    assert settler.settled("a")
    assert not settler.settled(None)


def parse_webhook(*options: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="fleetgate")
    cli.add_parser(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["webhook", "--policies", "p", *options])


def test_the_webhook_settles_policy_changes_for_a_configurable_time(capsys):
    assert parse_webhook().policy_settle == SETTLE
    assert parse_webhook("--policy-settle", "1.5").policy_settle == 1.5
    assert parse_webhook("--policy-settle", "0").policy_settle == 0
    with pytest.raises(SystemExit):
        parse_webhook("--policy-settle", "-1")
    assert "must be 0 seconds or more" in capsys.readouterr().err
