"""Hot reload: a bad edit keeps the last good set live, bursts are grouped, readers see whole sets.

The watcher tests use real files and a real watchfiles thread; every wait polls every 20 ms and
gives up after 10 s with the holder's status in the failure message.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import shutil
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
import watchfiles

from engine.errors import PolicyIssue, PolicyLoadError
from engine.policy.policyset import PolicySet, load_policy_set
from engine.policy.reload import (
    NoPolicySetError,
    PolicyHolder,
    PolicyWatcher,
    ReloadStatus,
    policy_change_filter,
)
from tests.conftest import REPO, configmap_volume, queue_doc
from tests.waiting import eventually, never

POLL_S = 0.02
PATIENCE_S = 30.0  # a bound against a hang, not a measure


def copy_policies(tmp_path: Path) -> Path:
    """The policy files as the webhook's ConfigMap mount holds them: without kustomization.yaml,
    which would refuse the unlisted files these tests add."""
    live = tmp_path / "policies"
    shutil.copytree(REPO / "policies", live, ignore=shutil.ignore_patterns("kustomization.yaml"))
    return live


def holder_for(directory: Path) -> PolicyHolder:
    holder = PolicyHolder(lambda: load_policy_set([directory]))
    assert holder.reload(), holder.status.errors
    return holder


def replace_file(path: Path, text: str) -> None:
    """Save the way editors and ConfigMap updates do: write aside, then rename over."""
    aside = path.with_name(f".{path.name}.tmp")
    aside.write_text(text)
    aside.replace(path)


def wait_until(condition: Callable[[], bool], what: str, holder: PolicyHolder) -> None:
    eventually(condition, what=what, detail=lambda: holder.status)


# --- the watcher on real files ---------------------------------------------------------------


def test_bad_edit_keeps_last_good_set_live_until_fixed(tmp_path):
    live = copy_policies(tmp_path)
    queues_file = live / "queues.yaml"
    original = queues_file.read_text()
    assert original.count("  weight: 2\n") == 1  # Queue/research
    holder = holder_for(live)
    first = holder.current.version

    with PolicyWatcher(holder, [live]):
        replace_file(queues_file, original.replace("  weight: 2\n", "  weight: -2\n"))
        wait_until(lambda: holder.status.failures >= 1, "the broken edit to be refused", holder)

        broken = holder.status
        assert holder.current.version == first
        assert broken.version == first
        assert broken.errors
        assert {issue.file for issue in broken.errors} == {str(queues_file)}
        assert ("Queue/research", "spec.weight") in {(i.obj, i.path) for i in broken.errors}
        assert broken.ready
        assert not broken.healthy

        replace_file(queues_file, original.replace("  weight: 2\n", "  weight: 3\n"))
        wait_until(lambda: holder.status.healthy, "the fixed file to be loaded", holder)

    fixed = holder.status
    assert holder.current.version == fixed.version
    assert fixed.version not in (None, first)
    assert fixed.version == load_policy_set([live]).version
    assert holder.current.queue("research").weight == 3
    assert fixed.errors == ()
    assert fixed.failures == broken.failures


def test_a_burst_of_writes_is_loaded_in_few_reloads(tmp_path):
    live = copy_policies(tmp_path)
    holder = holder_for(live)
    before = len(holder.current.queues)
    names = [f"burst-{i:02d}" for i in range(20)]

    with PolicyWatcher(holder, [live]) as watcher:
        for name in names:  # like a git checkout: one file after another, as fast as possible
            (live / f"{name}.yaml").write_text(queue_doc(name))
        wait_until(
            lambda: all(holder.current.queue(name) for name in names),
            "all 20 new queues to be live",
            holder,
        )

    assert len(holder.current.queues) == before + 20
    assert holder.status.healthy
    assert 1 <= watcher.batches <= 3, f"20 writes caused {watcher.batches} reloads"
    assert holder.status.reloads + holder.status.failures == 1 + watcher.batches


def test_a_configmap_update_is_reloaded(tmp_path):
    """The kubelet's AtomicWriter update; no event names a visible file such as queues.yaml."""
    files = {p.name: p.read_text() for p in sorted((REPO / "policies").glob("*.yaml"))}
    volume = configmap_volume(tmp_path / "policies", files, "2025_a")
    holder = holder_for(volume)
    first = holder.current.version
    assert files["queues.yaml"].count("  weight: 2\n") == 1  # Queue/research

    with PolicyWatcher(holder, [volume]) as watcher:
        new = volume / "..2025_b"
        new.mkdir()
        for name, text in files.items():
            (new / name).write_text(text.replace("  weight: 2\n", "  weight: 3\n"))
        (volume / "..data_tmp").symlink_to("..2025_b")
        (volume / "..data_tmp").replace(volume / "..data")  # os.replace: rename(2)
        shutil.rmtree(volume / "..2025_a")
        wait_until(
            lambda: holder.current.queue("research").weight == 3,
            "the swapped ConfigMap to be loaded",
            holder,
        )

    assert watcher.batches >= 1
    assert holder.status.healthy
    assert holder.current.version != first
    assert holder.current.version == load_policy_set([volume]).version


def test_hidden_editor_files_do_not_trigger_a_reload(tmp_path):
    live = copy_policies(tmp_path)
    holder = holder_for(live)
    queues = live / "queues.yaml"
    with PolicyWatcher(holder, [live], debounce_ms=100, step_ms=20) as watcher:
        (live / ".queues.yaml.swp").write_text("swap")
        (live / ".#queues.yaml").write_text("lock")
        (live / ".editor.swp.yaml").write_text(queue_doc("research", "weight: -1"))
        never(lambda: watcher.batches > 0, what="a reload for editor files")  # a batch alone
        replace_file(queues, queues.read_text().replace("  weight: 2\n", "  weight: 3\n"))
        wait_until(lambda: holder.current.queue("research").weight == 3, "the edit", holder)
    assert watcher.batches == 1
    assert holder.status.healthy


ROOT = Path("/etc/fleetgate/policies")


@pytest.mark.parametrize(
    ("path", "reload"),
    [
        ("queues.yaml", True),
        ("team/queues.yml", True),
        ("..data", True),
        ("..2025_03_10_10_00_00.123456789", True),
        ("..2025_03_10_10_00_00.123456789/queues.yaml", True),
        ("..data_tmp", False),
        (".queues.yaml.swp", False),
        (".#queues.yaml", False),
        (".editor.swp.yaml", False),
        (".queues.yaml.tmp", False),
        ("team/.queues.yaml.swp", False),
        (".git/queues.yaml", False),
        ("queues.yaml~", False),
        ("4913", False),  # vim's check that it may write the directory
        ("README.md", False),
    ],
)
def test_which_changes_reload(path, reload):
    accept = policy_change_filter([ROOT, ROOT.parent / ".hidden-root"])
    assert accept(watchfiles.Change.added, str(ROOT / path)) is reload
    assert accept(watchfiles.Change.modified, str(ROOT.parent / ".hidden-root" / path)) is reload


@pytest.mark.parametrize("how", ["stop", "context manager"])
def test_watcher_thread_ends_when_stopped(tmp_path, how):
    holder = holder_for(copy_policies(tmp_path))
    before = set(threading.enumerate())
    watcher = PolicyWatcher(holder, [tmp_path / "policies"])
    if how == "stop":
        watcher.start()
        started = set(threading.enumerate()) - before
        watcher.stop(timeout=5)
    else:
        with watcher:
            started = set(threading.enumerate()) - before

    assert [thread.name for thread in started] == ["policy-watcher"]
    (thread,) = started
    assert not thread.is_alive(), "the watcher thread outlived stop(timeout=5)"


def test_a_crashing_loader_is_reported_and_the_watch_goes_on(tmp_path):
    live = copy_policies(tmp_path)
    crash = {"next": False}

    def load() -> PolicySet:
        if crash["next"]:
            crash["next"] = False
            raise RuntimeError("bug in the loader")
        return load_policy_set([live])

    holder = PolicyHolder(load)
    assert holder.reload()
    version = holder.current.version
    queues = live / "queues.yaml"
    with PolicyWatcher(holder, [live], debounce_ms=100, step_ms=20):
        crash["next"] = True
        replace_file(queues, queues.read_text() + "\n# touched\n")
        wait_until(lambda: holder.status.failures == 1, "the crash to be recorded", holder)
        assert holder.current.version == version
        assert "bug in the loader" in holder.status.errors[0].message
        replace_file(queues, queues.read_text().replace("weight: 2", "weight: 4", 1))
        wait_until(lambda: holder.status.healthy, "the next edit to load", holder)
    assert holder.current.version != version


def test_watcher_starts_only_once(tmp_path):
    holder = holder_for(copy_policies(tmp_path))
    with PolicyWatcher(holder, [tmp_path / "policies"]) as watcher, pytest.raises(RuntimeError):
        watcher.start()


# --- readers and the swap --------------------------------------------------------------------


def test_readers_only_ever_see_whole_sets(tmp_path):
    """A reader spinning on ``current`` during reloads sees only complete, consistent sets."""
    live = copy_policies(tmp_path)
    queues_file = live / "queues.yaml"
    small = queues_file.read_text()
    large = small + "".join("---\n" + queue_doc(f"extra-{i}") for i in range(3))
    variants = [small, large]
    versions = []
    queue_counts: dict[str, int] = {}
    for text in variants:
        queues_file.write_text(text)
        policies = load_policy_set([live])
        versions.append(policies.version)
        queue_counts[policies.version] = len(policies.queues)
    assert len(set(queue_counts.values())) == 2

    holder = holder_for(live)
    stop = threading.Event()
    seen: Counter[str] = Counter()
    torn: list[str] = []

    def read() -> None:
        deadline = time.monotonic() + PATIENCE_S
        while not stop.is_set() and time.monotonic() < deadline:
            try:
                policies = holder.current
            except NoPolicySetError:
                torn.append("no policy set at all")
                continue
            count = len(policies.queues)
            whole = all(policies.queue(q.name) is q for q in policies.queues)
            if queue_counts.get(policies.version) != count or not whole:
                torn.append(f"version {policies.version} with {count} queues")
            seen[policies.version] += 1

    reader = threading.Thread(target=read, name="policy-reader")
    reader.start()
    try:
        for i in range(12):
            queues_file.write_text(variants[i % 2])
            assert holder.reload()
            assert holder.current.version == versions[i % 2]
    finally:
        stop.set()
        reader.join(timeout=5)

    assert not reader.is_alive()
    assert torn == []
    assert set(seen) == set(versions), f"the reader saw {dict(seen)}"


# --- PolicyHolder alone: injected load and clock, no files -----------------------------------

T0 = dt.datetime(2025, 1, 1, 12, 0, tzinfo=dt.UTC)
MIN = dt.timedelta(minutes=1)
ISSUE = PolicyIssue("q.yaml", 6, 13, "Queue/a", "spec.strategy", "'Fifo' is not one of ...")


@pytest.fixture(scope="module")
def example_set() -> PolicySet:
    return load_policy_set([REPO / "policies"])


def scripted(*outcomes: PolicySet | PolicyLoadError) -> Callable[[], PolicySet]:
    """A load function returning (or raising) the next outcome on each call."""
    pending = list(outcomes)

    def load() -> PolicySet:
        outcome = pending.pop(0)
        if isinstance(outcome, PolicyLoadError):
            raise outcome
        return outcome

    return load


def minutes(*offsets: int) -> Callable[[], dt.datetime]:
    """A clock that returns T0 + each offset in turn, one per call."""
    return iter([T0 + dt.timedelta(minutes=m) for m in offsets]).__next__


def test_holder_without_a_valid_load_is_not_ready():
    holder = PolicyHolder(scripted(PolicyLoadError([ISSUE])), clock=minutes(0))
    assert holder.status == ReloadStatus()
    assert not holder.status.ready
    with pytest.raises(NoPolicySetError):
        _ = holder.current

    assert holder.reload() is False
    status = holder.status
    with pytest.raises(NoPolicySetError):
        _ = holder.current
    assert not status.ready
    assert not status.healthy
    assert status.version is None
    assert status.loaded_at is None
    assert status.last_attempt_at == T0
    assert status.errors == (ISSUE,)
    assert (status.reloads, status.failures) == (0, 1)


def test_holder_counts_attempts_and_stamps_them_with_its_clock(example_set):
    v1 = dataclasses.replace(example_set, version="v1")
    v2 = dataclasses.replace(example_set, version="v2")
    load = scripted(PolicyLoadError([ISSUE]), v1, PolicyLoadError([ISSUE]), v2)
    holder = PolicyHolder(load, clock=minutes(0, 1, 2, 3))

    assert holder.reload() is False
    assert holder.reload() is True
    assert holder.current is v1
    status = holder.status
    assert (status.version, status.loaded_at, status.last_attempt_at) == ("v1", T0 + MIN, T0 + MIN)
    assert (status.reloads, status.failures, status.errors) == (1, 1, ())
    assert status.healthy

    assert holder.reload() is False
    assert holder.current is v1
    status = holder.status
    assert (status.version, status.loaded_at) == ("v1", T0 + MIN)
    assert status.last_attempt_at == T0 + 2 * MIN
    assert (status.reloads, status.failures, status.errors) == (1, 2, (ISSUE,))
    assert status.ready
    assert not status.healthy

    assert holder.reload() is True
    assert holder.current is v2
    status = holder.status
    assert (status.version, status.loaded_at) == ("v2", T0 + 3 * MIN)
    assert (status.reloads, status.failures, status.errors) == (2, 2, ())
    assert status.healthy


def test_status_is_a_value_replaced_whole(example_set):
    holder = PolicyHolder(scripted(example_set), clock=minutes(0))
    before = holder.status
    holder.reload()
    assert before.version is None  # the old value is untouched
    assert holder.status.version == example_set.version
    with pytest.raises(dataclasses.FrozenInstanceError):
        holder.status.failures = 0  # type: ignore[misc]
