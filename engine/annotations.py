"""The labels and annotations fleetgate reads and writes on ResourceBindings (a contract), and
those it reads on job templates (``AFTER``, ``SAME_CLUSTER_AS``, the ``GROUP`` ones).

The webhook writes ``MANAGED``, ``QUEUED_AT`` and ``POLICY_VERSION`` when it suspends a binding,
and ``READMIT`` when an admitted binding's demand grows. The reconciler writes the admission,
backoff and exclusion annotations; the scheduling cycle reads all of them. Times are RFC 3339
in UTC (``2025-03-10T09:10:00Z``).
"""

from __future__ import annotations

import datetime as dt

MANAGED = "fleetgate.io/managed"
"""Label, value ``"true"``: the webhook suspended this binding; only fleetgate may admit it."""

QUEUED_AT = "fleetgate.io/queued-at"
"""When the job entered its queue (creation, requeue or re-admission): the FIFO time."""

POLICY_VERSION = "fleetgate.io/policy-version"
"""The PolicySet version of the last decision written to the binding."""

ADMITTED_AT = "fleetgate.io/admitted-at"
"""When fleetgate admitted the binding; with ``spec.clusters`` set, the job is admitted."""

ADMITTED_TO = "fleetgate.io/admitted-to"
"""Comma-separated names of the clusters the binding was admitted to."""

READMIT = "fleetgate.io/readmit"
"""The time an admitted binding's demand grew; it waits in its queue again until re-admitted."""

BACKOFF_UNTIL = "fleetgate.io/backoff-until"
"""A requeued binding is not considered before this time."""

ATTEMPTS = "fleetgate.io/attempts"
"""How many times the binding has been admitted and then requeued."""

EXCLUDED_CLUSTERS = "fleetgate.io/excluded-clusters"
"""``name=RFC3339,…``: clusters where the job failed, excluded until the given time."""

PREEMPTIONS = "fleetgate.io/preemptions"
"""How many times the job was preempted (the reconciler adds one at each preemption);
``spec.preemption.maxPerJob`` reads it."""

GAVE_UP = "fleetgate.io/gave-up"
"""Why fleetgate stopped requeueing the binding after ``requeue.maxAttempts`` failed attempts
(reason, cluster, message). While it is present the cycle rejects the job (``GaveUp``); remove
it to give the job one more attempt (remove ``ATTEMPTS`` too for a full new set)."""

RUNNING_SINCE = "fleetgate.io/running-since"
"""When the reconciler first saw the admitted job running on all its clusters; from then on the
startup timeout no longer applies to this admission."""

NOMINATED_CLUSTER = "fleetgate.io/nominated-cluster"
"""The cluster a preempting job waits for while its victims terminate."""

PENDING = "fleetgate.io/pending"
"""``Reason: message`` of the last Pending or Reject decision, the message without live numbers,
positions or the head of a StrictFIFO queue (``engine.cycle.explain.pending_note``): it changes
only when why the job waits changes. The live message and the place are the API's."""

QUEUE_POSITION = "fleetgate.io/queue-position"
"""No longer written (it rewrote every waiting binding of a queue that moved): the place of a
waiting job is the API's (``/api/v1/jobs``). The reconciler removes one an older version left."""

ADMITTED_GROUP = "fleetgate.io/admitted-group"
"""The co-admission group (``HyperJob/ns/name`` or ``group/ns/name``) the binding was admitted
with; the reconciler keeps at least ``ADMITTED_GROUP_MIN`` of its members placed, or none
(``engine.enforce.groupplan``). Written with the admission, removed when the binding leaves."""

ADMITTED_GROUP_MIN = "fleetgate.io/admitted-group-min"
"""The group's minimum (members placed at once) when the binding was admitted with it."""

GROUP_PLAN = "fleetgate.io/group-plan"
"""JSON ``{"group", "id", "clusters", "min", "size", "version"}``: the group admission this
member is part of (phase 1 of a group's two-phase binding, ``engine.enforce.groupphase``), written
on every member before any is bound and kept on a bound member; a plan some member is bound
under while another planned member is not is completed on the planned clusters or rolled back."""

# On the job template (users write these; see docs/pipelines.md):

AFTER = "fleetgate.io/after"
"""``[condition:][Kind/][namespace/]name, …``: jobs that must end first (condition
``succeeded``, the default, ``finished`` or ``failed``)."""

SAME_CLUSTER_AS = "fleetgate.io/same-cluster-as"
"""``[Kind/][namespace/]name``: place the job only where that job was placed."""

# Co-admission groups (docs/multi-cluster-training.md), on the job template:

GROUP = "fleetgate.io/group"
"""``NAME``: the job is a member of the group NAME of its namespace, admitted all together."""

GROUP_SIZE = "fleetgate.io/group-size"
"""``N``: how many members the group has; it waits until all N exist."""

GROUP_MIN = "fleetgate.io/group-min"
"""``M`` (default: the size): the members that must be admitted at once."""

GROUP_SPREAD = "fleetgate.io/group-spread"
"""``clusters``: every member on a cluster of its own (also read on a HyperJob)."""

NODE_SHAPES = "fleetgate.io/node-shapes"
"""Annotation on a Karmada ``Cluster``: a JSON list of the kinds of node the member has, each
the allocatable of one node (``[{"cpu": "96", "memory": "768Gi", "nvidia.com/gpu": "8"},
{"cpu": "64", "memory": "256Gi"}]``). Karmada reports no per-node sizes (its resource models
only promise each grade's minimum), so this is how the cycle knows that a pod can never fit
(``NeverFits``) and how much a node of a grade may hold at most. Written by the platform team
(or by the sandbox and the simulator, which know their nodes); absent: only the cluster's
totals bound a node."""
MAX_NODE_SHAPES = 64  # kinds of node one annotation may list


def format_time(value: dt.datetime) -> str:
    return value.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> dt.datetime | None:
    """An RFC 3339 time, or None when ``text`` is not one (a hand-edited annotation)."""
    try:
        parsed = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def parse_exclusions(text: str) -> dict[str, dt.datetime]:
    """``EXCLUDED_CLUSTERS`` → cluster name → until; malformed entries are skipped."""
    result: dict[str, dt.datetime] = {}
    for item in text.split(","):
        name, _, until = item.partition("=")
        when = parse_time(until) if until else None
        if name.strip() and when is not None:
            result[name.strip()] = when
    return result
