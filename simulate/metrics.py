"""What a run is measured by: integrals over simulated time, samples, and the summary.

The loop calls ``advance(t)`` before it changes anything at time ``t``; every quantity is
piecewise constant between such calls, so integrals are exact (no sampling error):

* queue usage (resources admitted and not finished, per queue) → ``share_mean``: the mean of
  usage(GPU) / fleet GPUs over the time the queue was busy (a job pending or admitted);
* per-window GPU-seconds per queue → Jain's index ``(Σx)² / (n·Σx²)`` of ``x = GPU-seconds /
  weight`` over the queues that wanted GPUs in the window (a GPU job pending or admitted);
  ``None`` when fewer than two did;
* per-window GPU-seconds asked per queue (admitted + waiting) → the fair-share attainment of
  those queues (``simulate.fairshare``): their GPU-seconds against their weighted max-min fair
  shares given what they asked for;
* cluster utilisation: requests of the bound pods of started jobs / allocatable, per resource
  (what the Cluster status reports as ``allocated``, but for pods of a job not started yet),
  time-weighted; the fleet's GPU-seconds used up to the last submit (``arrivals_end``, set by
  the loop) give the utilisation over the arrival span;
* fragmentation (``fragmentation``) is computed at sample times only.

Samples (``Series``) are taken every ``sample_s`` of simulated time.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from engine.policy.policyset import PolicySet
from simulate.fairshare import attainment
from simulate.results import GPU, JobRecord, Series

RESOURCES = (GPU, "cpu", "memory")
Shape = tuple[tuple[int, float, float, float], ...]  # per role: (pods, gpu, cpu, memory)


def percentiles(values: Sequence[float]) -> dict[str, float | None]:
    """p50, p95, p99 (linear interpolation between closest ranks) and max; None when empty."""
    if not values:
        return {"p50": None, "p95": None, "p99": None, "max": None}
    ordered = sorted(values)

    def pick(q: float) -> float:
        rank = q * (len(ordered) - 1)
        low = math.floor(rank)
        high = min(low + 1, len(ordered) - 1)
        return round(ordered[low] + (ordered[high] - ordered[low]) * (rank - low), 3)

    return {"p50": pick(0.5), "p95": pick(0.95), "p99": pick(0.99), "max": round(ordered[-1], 3)}


def waits(records: Iterable[JobRecord], end: float) -> list[float]:
    """The waits of the jobs submitted by ``end``: to the last admission, and ``end − submit``
    for a job never admitted (censored, a lower bound), so that jobs never admitted do not drop
    out of the percentiles."""
    return [w for r in records if (w := r.censored_wait(end)) is not None]


def jain(values: Sequence[float]) -> float | None:
    if len(values) < 2:
        return None
    total = sum(values)
    squares = sum(v * v for v in values)
    return 1.0 if squares == 0 else total * total / (len(values) * squares)


def fragmentation(nodes_free: Sequence[list[float]], shapes: Iterable[Shape]) -> float:
    """GPUs free on nodes that no waiting job can use: a node counts as usable when some waiting
    job's whole gang fits the cluster now (first fit over the nodes' free cpu, memory, GPUs) and
    the node can hold one of its GPU pods. ``nodes_free``: per node [gpu, cpu, memory]."""
    free_gpus = sum(n[0] for n in nodes_free)
    if free_gpus <= 0:
        return 0.0
    usable = [False] * len(nodes_free)
    for shape in shapes:
        trial = [list(n) for n in nodes_free]
        fits = True
        for pods, gpu, cpu, memory in shape:
            for _ in range(pods):
                node = next(
                    (n for n in trial if n[0] >= gpu and n[1] >= cpu and n[2] >= memory), None
                )
                if node is None:
                    fits = False
                    break
                node[0] -= gpu
                node[1] -= cpu
                node[2] -= memory
            if not fits:
                break
        if not fits:
            continue
        for i, n in enumerate(nodes_free):
            if any(g > 0 and n[0] >= g and n[1] >= c and n[2] >= m for _, g, c, m in shape):
                usable[i] = True
    return float(sum(n[0] for n, ok in zip(nodes_free, usable, strict=True) if not ok))


class Metrics:
    def __init__(
        self,
        policies: PolicySet,
        allocatable: Mapping[str, Sequence[float]],  # cluster → GPUs, cores, bytes
        fleet_gpus: float,
        window_s: float,
        sample_s: float,
    ) -> None:
        self.policies = policies
        self.fleet_gpus = fleet_gpus
        self.window_s = window_s
        self.sample_s = sample_s
        self.t = 0.0
        self.series = Series()
        self.series.queue_guarantee = {
            q.name: {k: float(v) for k, v in q.guarantee.items()} for q in policies.queues
        }
        self.usage: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
        self.waiting: dict[str, int] = defaultdict(int)  # queue → jobs pending
        # queue → preemptions by another queue's job that left it below its GPU guarantee
        self.below_guarantee: dict[str, int] = defaultdict(int)
        self.waiting_gpu: dict[str, int] = defaultdict(int)  # queue → GPU jobs pending
        self.waiting_gpus: dict[str, float] = defaultdict(float)  # queue → their GPUs
        self.busy_time: dict[str, float] = defaultdict(float)
        self.share_area: dict[str, float] = defaultdict(float)
        self.window_area: dict[str, float] = defaultdict(float)
        self.window_wanted: set[str] = set()
        self.window_start = 0.0
        self.window_jain: list[float] = []
        self.window_demand: dict[str, float] = defaultdict(float)  # GPU-s admitted + waiting
        self.window_attainment: list[float] = []
        self.queue_attainment: dict[str, tuple[float, int]] = {}  # Σ terms, windows
        self.arrivals_end = math.inf
        self.arrivals_gpu_s: float | None = None  # the fleet's GPU-seconds up to arrivals_end
        self.recent: list[tuple[float, dict[str, float], set[str]]] = []  # closed windows
        clusters = sorted(allocatable)
        self.allocatable = {c: tuple(allocatable[c]) for c in clusters}
        self.used: dict[str, list[float]] = {c: [0.0, 0.0, 0.0] for c in clusters}
        self.util: dict[str, dict[str, float]] = {c: {} for c in clusters}
        self.util_area: dict[str, dict[str, float]] = {c: defaultdict(float) for c in clusters}
        self.frag_samples: dict[str, list[float]] = {c: [] for c in clusters}
        self.next_sample = 0.0

    # -- state changes -----------------------------------------------------------------------

    def admit(self, queue: str, demand: Sequence[float], sign: int = 1) -> None:
        usage = self.usage[queue]
        for i in range(3):
            usage[i] = max(0.0, usage[i] + sign * demand[i])

    def reclaimed(self, queue: str, demand: Sequence[float]) -> None:
        """Another queue's job preempts a job of ``queue`` holding ``demand`` (called before
        the room is given back): counted when it leaves ``queue`` with fewer GPUs than its
        guarantee, which reclaim never may (it takes only what a queue borrows)."""
        guaranteed = self.series.queue_guarantee.get(queue, {}).get(GPU, 0.0)
        if self.usage[queue][0] - demand[0] < guaranteed - 1e-9:
            self.below_guarantee[queue] += 1

    def wait(self, queue: str, gpus: float, delta: int) -> None:
        """A job of ``gpus`` GPUs starts (``delta`` 1) or stops (-1) waiting in ``queue``."""
        self.waiting[queue] += delta
        if gpus > 0:
            self.waiting_gpu[queue] += delta
            self.waiting_gpus[queue] = max(0.0, self.waiting_gpus[queue] + delta * gpus)

    def occupy(self, cluster: str, usage: Sequence[float], sign: int = 1) -> None:
        """Pods of a job part bound (sign 1) or freed (-1) on ``cluster``."""
        used = self.used[cluster]
        for i in range(3):
            used[i] = max(0.0, used[i] + sign * usage[i])
        self.util[cluster] = {
            r: used[i] / total
            for i, r in enumerate(RESOURCES)
            if (total := self.allocatable[cluster][i])
        }

    # -- time ---------------------------------------------------------------------------------

    def advance(self, t: float) -> None:
        """Integrate the current state over [last t, t], closing fairness windows on the way."""
        while t > self.t:
            step_to = min(t, self.window_start + self.window_s)
            if self.t < self.arrivals_end < step_to:
                step_to = self.arrivals_end
            dt_ = step_to - self.t
            for queue, usage in self.usage.items():
                busy = usage[0] > 0 or usage[1] > 0 or self.waiting[queue] > 0
                if busy:
                    self.busy_time[queue] += dt_
                    if self.fleet_gpus:
                        self.share_area[queue] += usage[0] / self.fleet_gpus * dt_
                if usage[0] > 0:
                    self.window_area[queue] += usage[0] * dt_
                if usage[0] > 0 or self.waiting_gpu[queue] > 0:
                    self.window_wanted.add(queue)
                    self.window_demand[queue] += (usage[0] + self.waiting_gpus[queue]) * dt_
            for queue, count in self.waiting.items():
                if count > 0 and queue not in self.usage:
                    self.busy_time[queue] += dt_
                if self.waiting_gpu.get(queue, 0) > 0:
                    self.window_wanted.add(queue)
                    if queue not in self.usage:
                        self.window_demand[queue] += self.waiting_gpus[queue] * dt_
            for name, values in self.util.items():
                area = self.util_area[name]
                for r, v in values.items():
                    area[r] += v * dt_
            self.t = step_to
            if self.arrivals_gpu_s is None and step_to >= self.arrivals_end:
                self.arrivals_gpu_s = self._gpu_seconds()
            if step_to >= self.window_start + self.window_s:
                self._close_window()

    def _close_window(self) -> None:
        shares = {q: self.window_area.get(q, 0.0) for q in self.window_wanted}
        self.recent.append((self.window_start + self.window_s, shares, set(self.window_wanted)))
        index = jain([v / self._weight(q) for q, v in sorted(shares.items())])
        if index is not None:
            self.window_jain.append(index)
        weights = {q: self._weight(q) for q in shares}
        demands = {q: self.window_demand.get(q, 0.0) for q in shares}
        mean, terms = attainment(shares, demands, weights)
        if mean is not None:
            self.window_attainment.append(mean)
        for queue, term in terms.items():
            total, windows = self.queue_attainment.get(queue, (0.0, 0))
            self.queue_attainment[queue] = (total + term, windows + 1)
        self.window_start += self.window_s
        self.window_area = defaultdict(float)
        self.window_demand = defaultdict(float)
        self.window_wanted = set()

    def _gpu_seconds(self) -> float:
        """GPU-seconds the fleet's started jobs used so far."""
        return sum(self.util_area[c].get(GPU, 0.0) * a[0] for c, a in self.allocatable.items())

    def _weight(self, queue: str) -> float:
        found = self.policies.queue(queue)
        return float(found.weight) if found is not None and found.weight > 0 else 1.0

    def due(self, t: float) -> bool:
        return t >= self.next_sample

    def sample(self, t: float, fragmentation_now: Mapping[str, float]) -> None:
        s = self.series
        s.times.append(t)
        for name, values in self.util.items():
            per = s.cluster_utilisation.setdefault(name, {})
            for r in (GPU, "cpu"):
                per.setdefault(r, [0.0] * (len(s.times) - 1)).append(values.get(r, 0.0))
            frag = fragmentation_now.get(name, 0.0)
            s.cluster_fragmentation.setdefault(name, [0.0] * (len(s.times) - 1)).append(frag)
            self.frag_samples[name].append(frag)
        for queue, usage in sorted(self.usage.items()):
            per = s.queue_usage.setdefault(queue, {})
            for i, r in enumerate(RESOURCES):
                per.setdefault(r, [0.0] * (len(s.times) - 1)).append(usage[i])
        for per in s.queue_usage.values():  # queues with no entry yet this time
            for r in RESOURCES:
                values = per.setdefault(r, [])
                values.extend([0.0] * (len(s.times) - len(values)))
        window = self.recent[-1] if self.recent else None
        index = None
        if window is not None:
            _, shares, _wanted = window
            index = jain([v / self._weight(q) for q, v in sorted(shares.items())])
        s.fairness.append(index)
        while self.next_sample <= t:
            self.next_sample += self.sample_s

    # -- the summary --------------------------------------------------------------------------

    def summary(self, records: Sequence[JobRecord], end: float) -> dict[str, object]:
        queues: dict[str, dict[str, object]] = {}
        tenants: dict[str, dict[str, object]] = {}
        by_queue: dict[str, list[JobRecord]] = defaultdict(list)
        by_tenant: dict[str, list[JobRecord]] = defaultdict(list)
        for r in records:
            by_queue[r.queue].append(r)
            by_tenant[r.tenant].append(r)
        for name in sorted(by_queue):
            jobs = by_queue[name]
            spec = self.policies.queue(name)
            queues[name] = {
                "tenant": jobs[0].tenant,
                "weight": float(spec.weight) if spec else None,
                "guarantee": {k: float(v) for k, v in spec.guarantee.items()} if spec else {},
                "jobs": len(jobs),
                "admitted": sum(1 for r in jobs if r.admitted is not None),
                "wait_s": percentiles(waits(jobs, end)),
                "completion_s": percentiles(
                    [
                        r.finished - r.submitted
                        for r in jobs
                        if r.state == "succeeded" and r.finished
                    ]
                ),
                "share_mean": self._share(name),
                "attainment_mean": self._attainment(name),
                "reclaimed_below_guarantee": self.below_guarantee.get(name, 0),
            }
        for name in sorted(by_tenant):
            jobs = by_tenant[name]
            names = {r.queue for r in jobs}
            busy = sum(self.busy_time.get(q, 0.0) for q in names)
            area = sum(self.share_area.get(q, 0.0) for q in names)
            tenants[name] = {
                "jobs": len(jobs),
                "admitted": sum(1 for r in jobs if r.admitted is not None),
                "wait_s": percentiles(waits(jobs, end)),
                "share_mean": round(area / busy, 6) if busy else 0.0,
            }
        clusters = {
            name: {
                "utilisation": {
                    r: round(v / end, 6) if end else 0.0
                    for r, v in sorted(self.util_area[name].items())
                },
                "fragmentation_gpu_mean": round(
                    sum(self.frag_samples[name]) / len(self.frag_samples[name]), 3
                )
                if self.frag_samples[name]
                else 0.0,
            }
            for name in sorted(self.util_area)
        }
        fairness = {
            "window_s": self.window_s,
            "jain_mean": round(sum(self.window_jain) / len(self.window_jain), 6)
            if self.window_jain
            else None,
            "jain_min": round(min(self.window_jain), 6) if self.window_jain else None,
            "windows": len(self.window_jain),
            "attainment_mean": _mean(self.window_attainment),
            "attainment_min": round(min(self.window_attainment), 6)
            if self.window_attainment
            else None,
        }
        return {
            "queues": queues,
            "tenants": tenants,
            "clusters": clusters,
            "fairness": fairness,
            **self._arrival_span(end),
        }

    def _arrival_span(self, end: float) -> dict[str, float | None]:
        """The fleet's mean GPU utilisation from the first submit to the last one (or to the
        end of the run, when it stopped before the last submit)."""
        span = min(end, self.arrivals_end)
        used = self.arrivals_gpu_s if end > self.arrivals_end else self._gpu_seconds()
        gpus = sum(a[0] for a in self.allocatable.values())
        return {
            "arrival_span_s": span,
            "gpu_utilisation_arrival_span": round(used / (gpus * span), 6)
            if span > 0 and gpus > 0 and used is not None
            else None,
        }

    def _attainment(self, queue: str) -> float | None:
        total, windows = self.queue_attainment.get(queue, (0.0, 0))
        return round(total / windows, 6) if windows else None

    def _share(self, queue: str) -> float:
        busy = self.busy_time.get(queue, 0.0)
        return round(self.share_area.get(queue, 0.0) / busy, 6) if busy else 0.0


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 6) if values else None


def stages(records: Sequence[JobRecord], end: float) -> dict[str, dict[str, object]]:
    by_stage: dict[str, list[JobRecord]] = defaultdict(list)
    for r in records:
        if r.stage:
            by_stage[r.stage].append(r)
    return {
        name: {
            "jobs": len(jobs),
            "wait_s": percentiles(waits(jobs, end)),
        }
        for name, jobs in sorted(by_stage.items())
    }
