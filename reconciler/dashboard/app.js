// fleetgate's dashboard: the fleet, its queues, its jobs and one job, read from the
// visibility API (visibility.fleetgate.io/v1alpha1) as the user, every 5 s while shown.
// Every string from the API is put in the page as text (never as markup).
"use strict";

const PREFIX = "/apis/visibility.fleetgate.io/v1alpha1";
const POLL_MS = 5000;
const PAGE_SIZE = 50;
const GPU = "nvidia.com/gpu";
const STATES = ["pending", "admitted", "rejected", "preempted"];

const session = { namespace: null, route: null, timer: null, generation: 0 };

// -- building the page --------------------------------------------------------------------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = String(value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const SVG_NS = "http://www.w3.org/2000/svg";
function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function fill(region, ...parts) {
  region.replaceChildren(...parts.flat().filter((p) => p !== null && p !== undefined && p !== ""
    && p !== false));
}

function table(caption, headers, rows, attrs) {
  const head = el("tr", {}, headers.map((h) =>
    el("th", { scope: "col", class: h.startsWith("#") ? "num" : null }, h.replace(/^#/, ""))));
  return el("table", attrs || {}, el("caption", {}, caption), el("thead", {}, head),
    el("tbody", {}, rows));
}

function cell(value, attrs) {
  return el("td", attrs || {}, value);
}

function num(value, field) {
  return el("td", { class: "num", "data-field": field || null }, value);
}

function link(href, text) {
  return el("a", { href }, text);
}

function amount(value) {
  if (value === null || value === undefined) return "-";
  const n = Number(value);
  if (!Number.isFinite(n)) return String(value);
  return Number.isInteger(n) ? String(n) : n.toFixed(2).replace(/\.?0+$/, "");
}

function gpus(resources) {
  return resources && resources[GPU] !== undefined ? Number(resources[GPU]) : 0;
}

function age(stamp, now) {
  if (!stamp) return "-";
  const seconds = Math.max(0, ((now || Date.now()) - Date.parse(stamp)) / 1000);
  if (seconds < 120) return `${Math.round(seconds)}s`;
  if (seconds < 7200) return `${Math.round(seconds / 60)}m`;
  if (seconds < 172800) return `${Math.round(seconds / 3600)}h`;
  return `${Math.round(seconds / 86400)}d`;
}

function when(stamp) {
  if (!stamp) return "-";
  const date = new Date(stamp);
  return Number.isNaN(date.getTime()) ? String(stamp) : date.toISOString().replace(".000Z", "Z");
}

function stateBadge(state, running) {
  const text = running ? "running" : state || "-";
  const kind = { admitted: "ok", running: "ok", rejected: "bad", preempted: "warn" }[text];
  return el("span", { class: `badge ${kind || "muted"}`, "data-state": text }, text);
}

// -- reading the API ----------------------------------------------------------------------

async function read(path, params) {
  const query = params ? `?${new URLSearchParams(params)}` : "";
  let response;
  try {
    response = await fetch(path + query, { headers: { Accept: "application/json" },
      credentials: "same-origin" });
  } catch (error) {
    return { ok: false, status: 0, body: { message: `cannot reach the server: ${error}` } };
  }
  let body = {};
  try {
    body = await response.json();
  } catch (error) {
    body = { message: `${response.status} ${response.statusText}` };
  }
  return { ok: response.ok, status: response.status, body };
}

function problem(answer, what) {
  const said = (answer.body && answer.body.message) || `HTTP ${answer.status}`;
  const why = answer.status === 403
    ? `You may not read ${what}: ${said}`
    : `Cannot read ${what}: ${said}`;
  return el("p", { class: "error", role: "alert" }, why);
}

async function config() {
  if (session.namespace !== null) return;
  const answer = await read(`${PREFIX}/dashboard/config.json`);
  session.namespace = answer.ok && answer.body.namespace ? String(answer.body.namespace) : "";
}

// -- routing and polling ------------------------------------------------------------------

function parseRoute() {
  const hash = location.hash.replace(/^#\/?/, "") || "fleet";
  const [path, query] = hash.split("?", 2);
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  return { page: parts[0] || "fleet", parts: parts.slice(1),
    params: new URLSearchParams(query || "") };
}

const PAGES = { fleet: fleetPage, queues: queuesPage, jobs: jobsPage, job: jobPage };

async function show() {
  clearTimeout(session.timer);
  const route = parseRoute();
  const page = PAGES[route.page] ? route.page : "fleet";
  session.generation += 1;
  const generation = session.generation;
  for (const a of document.querySelectorAll("nav a")) {
    const current = a.dataset.page === page || (page === "job" && a.dataset.page === "jobs");
    if (current) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  const main = document.getElementById("main");
  const refresh = await PAGES[page](main, route);
  performance.mark("fleetgate:drawn");  // what `make bench-dashboard` times
  const tick = async () => {
    if (generation !== session.generation) return;
    if (!document.hidden) {
      try {
        await refresh();
        performance.mark("fleetgate:updated");
      } catch (error) {
        status(`update failed: ${error}`);
      }
    }
    if (generation === session.generation) session.timer = setTimeout(tick, POLL_MS);
  };
  session.timer = setTimeout(tick, POLL_MS);
}

function status(text) {
  document.getElementById("status").textContent = text;
}

function updated(body) {
  const meta = (body && body.metadata) || {};
  const version = meta.policyVersion || (body && body.policy && body.policy.version) || "";
  const time = new Date().toLocaleTimeString();
  status(`updated ${time}${version ? ` · policy ${version}` : ""}`);
}

function start(main, title) {
  main.replaceChildren(el("h1", {}, title));
  document.title = `${title} · fleetgate`;
  const region = el("div", { "data-region": "live" });
  main.append(region);
  return region;
}

// -- Fleet --------------------------------------------------------------------------------

async function fleetPage(main) {
  const region = start(main, "Fleet");
  const refresh = async () => {
    const answer = await read(`${PREFIX}/fleets/current`);
    if (!answer.ok) {
      fill(region, problem(answer, "the fleet (get fleets)"));
      return;
    }
    fill(region, ...fleetView(answer.body));
    updated(answer.body);
  };
  await refresh();
  return refresh;
}

function fleetView(fleet) {
  const policy = fleet.policy || {};
  const healthy = policy.healthy !== false;
  const facts = el("dl", { class: "facts", "data-section": "policy" },
    el("dt", {}, "Policy version"), el("dd", { "data-field": "policy-version" }, policy.version || "-"),
    el("dt", {}, "Policy files"),
    el("dd", { "data-field": "policy-health", class: healthy ? "ok" : "bad" },
      healthy ? "✔ loaded" : "✖ do not load: the last good set is live"),
    el("dt", {}, "Loaded at"), el("dd", {}, when(policy.loadedAt)),
    el("dt", {}, "Reloads / failures"), el("dd", {}, `${policy.reloads ?? "-"} / ${policy.failures ?? "-"}`),
    el("dt", {}, "Decided at"), el("dd", {}, when(fleet.decidedAt)),
    el("dt", {}, "History since"), el("dd", {}, when(fleet.historySince)));
  const errors = (policy.errors || []).map((e) => el("li", {}, e));
  const clusters = fleet.clusters || [];
  const rows = clusters.map((c) => {
    const cap = gpus(c.allocatable);
    const used = gpus(c.allocated);
    const admitted = gpus(c.admitted);
    const spells = (c.notReady || []).map((s) =>
      el("li", {}, `${when(s.since)} – ${s.until ? when(s.until) : "now"}`));
    return el("tr", { "data-cluster": c.name },
      el("th", { scope: "row" }, c.name),
      cell(el("span", { class: c.ready ? "ok" : "bad", "data-field": "ready" },
        c.ready ? "✔ Ready" : "✖ NotReady")),
      cell(c.region || "-"),
      el("td", { class: "num" },
        el("span", { "data-field": "gpu-allocatable" }, amount(cap)), " / ",
        el("span", { "data-field": "gpu-allocated" }, amount(used)), " / ",
        el("span", { "data-field": "gpu-admitted" }, amount(admitted)),
        usageBar(cap, used, admitted, c.name)),
      num(`${amount((c.allocatable || {}).cpu ?? 0)} / ${amount((c.allocated || {}).cpu ?? 0)}`),
      cell(spells.length ? el("ul", {}, spells) : el("span", { class: "muted" }, "none seen")));
  });
  const totals = clusters.reduce((t, c) => [t[0] + gpus(c.allocatable), t[1] + gpus(c.allocated),
    t[2] + gpus(c.admitted)], [0, 0, 0]);
  return [
    el("h2", {}, "Policies"), facts,
    errors.length ? el("ul", { class: "error", "data-field": "policy-errors" }, errors) : null,
    el("h2", {}, "Clusters"),
    el("p", { "data-field": "gpu-totals" },
      `${clusters.length} clusters · GPUs allocatable ${amount(totals[0])}, allocated ` +
      `${amount(totals[1])}, admitted by fleetgate ${amount(totals[2])}`),
    table("Each member cluster: GPUs allocatable / allocated (Karmada's status) / admitted by " +
      "fleetgate, CPU cores allocatable / allocated, and the times it was not Ready.",
    ["Cluster", "Ready", "Region", "#GPUs", "#CPU", "NotReady history"], rows,
    { "data-table": "clusters" }),
  ];
}

function usageBar(capacity, used, admitted, name) {
  const width = 100;
  const scale = (v) => (capacity > 0 ? Math.min(width, (v / capacity) * width) : 0);
  const label = `${name}: ${amount(used)} of ${amount(capacity)} GPUs allocated, ` +
    `${amount(admitted)} admitted by fleetgate`;
  return svg("svg", { class: "bar", viewBox: "0 0 100 10", role: "img", "aria-label": label },
    svg("title", {}, label),
    svg("rect", { class: "cap", x: 0, y: 0, width, height: 10 }),
    svg("rect", { class: "used", x: 0, y: 0, width: scale(used), height: 5 }),
    svg("rect", { class: "admitted", x: 0, y: 5, width: scale(admitted), height: 5 }));
}

// -- Queues -------------------------------------------------------------------------------

async function queuesPage(main, route) {
  const region = start(main, "Queues");
  const tokens = (route.params.get("pages") || "").split(",").filter(Boolean);
  const refresh = async () => {
    const query = { limit: String(PAGE_SIZE) };
    if (tokens.length) query.continue = tokens[tokens.length - 1];
    const answer = await read(`${PREFIX}/queues`, query);
    if (!answer.ok) {
      fill(region, problem(answer, "the queues (list queues)"));
      return;
    }
    fill(region, queuesView(answer.body.items || []),
      pager("#/queues", new URLSearchParams(), tokens, answer.body));
    updated(answer.body);
  };
  await refresh();
  return refresh;
}

function queuesView(items) {
  // in the tree's order, a page at a time (the server's): each row indented by its depth
  const rows = items.map((q) => queueRow(q, Number(q.depth || 0)));
  return table("Each queue's whole subtree: GPUs used / guaranteed / max, borrowed beyond its " +
    "guarantee, guarantee lent (unused), weighted share against its weight, jobs, jobs holding " +
    "room, and its share over the last hours.",
  ["Queue", "#GPUs used / guarantee / max", "#Borrowed", "#Lent", "#Share", "#Weight",
    "#Admitted", "#Pending", "#Reservations", "Share over time"], rows,
  { "data-table": "queues" });
}

function pager(page, base, tokens, body) {
  // previous and next pages of a server-paged list, as addresses that can be shared
  const meta = body.metadata || {};
  const shown = (body.items || []).length;
  const remaining = meta.remainingItemCount || 0;
  const bar = el("div", { class: "pager" });
  if (tokens.length) {
    const back = new URLSearchParams(base);
    const earlier = tokens.slice(0, -1);
    if (earlier.length) back.set("pages", earlier.join(","));
    else back.delete("pages");
    const query = back.toString();
    bar.append(link(`${page}${query ? `?${query}` : ""}`, "← previous page"));
  }
  bar.append(el("span", { class: "muted" }, `${shown} shown${remaining ? `, ${remaining} more` : ""}`));
  if (meta.continue) {
    const forward = new URLSearchParams(base);
    forward.set("pages", [...tokens, meta.continue].join(","));
    bar.append(link(`${page}?${forward}`, "next page →"));
  }
  return bar;
}

function queueRow(q, depth) {
  const name = q.metadata.name;
  const used = gpus(q.usage);
  const guarantee = gpus(q.guarantee);
  const max = q.max && q.max[GPU] !== undefined ? amount(q.max[GPU]) : "∞";
  const borrowed = Math.max(0, used - guarantee);
  const lent = Math.max(0, guarantee - used);
  const label = el("th", { scope: "row", style: null },
    el("span", { class: "muted", "aria-hidden": "true" }, "· ".repeat(depth)),
    link(`#/jobs?queue=${encodeURIComponent(name)}`, name));
  return el("tr", { "data-queue": name },
    label,
    el("td", { class: "num" }, el("span", { "data-field": "gpu-usage" }, amount(used)),
      ` / ${amount(guarantee)} / ${max}`),
    num(amount(borrowed), "borrowed"), num(amount(lent), "lent"),
    num(Number(q.share || 0).toFixed(3), "share"), num(amount(q.weight), "weight"),
    num(q.admitted, "admitted"), num(q.pending, "pending"),
    num(q.reservations ?? 0, "reservations"),
    cell(spark(name, q.history || {})));
}

function spark(name, history) {
  const points = history.points || [];
  if (points.length < 2) return el("span", { class: "muted" }, "not enough history yet");
  const span = Math.max(1, points[points.length - 1][0]);
  const top = Math.max(0.001, ...points.map((p) => p[1]));
  const xy = points.map((p) => `${((p[0] / span) * 100).toFixed(1)},` +
    `${(28 - (p[1] / top) * 26).toFixed(1)}`).join(" ");
  const first = points[0][1];
  const last = points[points.length - 1][1];
  const label = `${name}: share ${first.toFixed(3)} at ${when(history.start)}, ` +
    `${last.toFixed(3)} now, at most ${top.toFixed(3)}, over ${Math.round(span / 60)} minutes`;
  const chart = svg("svg", { class: "spark", viewBox: "0 0 100 30", role: "img",
    "aria-label": label, preserveAspectRatio: "none" },
  svg("title", {}, label), svg("line", { x1: 0, y1: 28, x2: 100, y2: 28 }),
  svg("polyline", { points: xy }));
  const start = Date.parse(history.start);
  const data = table(`Share of ${name}`, ["Time", "#Share", "#GPUs"], points.map((p) =>
    el("tr", {}, cell(when(new Date(start + p[0] * 1000).toISOString())),
      num(Number(p[1]).toFixed(3)), num(amount(p[2])))));
  return [chart, el("details", {}, el("summary", {}, "data"), data)];
}

// -- Jobs ---------------------------------------------------------------------------------

async function jobsPage(main, route) {
  await config();
  const params = route.params;
  const region = start(main, "Jobs");
  main.insertBefore(filterForm(params), region);
  const tokens = (params.get("pages") || "").split(",").filter(Boolean);
  const refresh = async () => {
    const found = await listJobs(params, tokens[tokens.length - 1] || "");
    if (!found.answer.ok) {
      fill(region, found.notice || "", problem(found.answer, "jobs (list jobs)"));
      return;
    }
    fill(region, ...jobsView(found, params, tokens));
    updated(found.answer.body);
  };
  await refresh();
  return refresh;
}

const FILTERS = [["queue", "Queue"], ["state", "State"], ["kind", "Kind"], ["reason", "Reason"]];

function filterForm(params) {
  const form = el("form", { class: "filters", role: "search", "aria-label": "Filter jobs" });
  form.append(el("label", {}, "Namespace",
    el("input", { name: "namespace", value: params.get("namespace") || "",
      placeholder: session.namespace || "* (every one)", autocomplete: "off", size: 16 })));
  for (const [key, label] of FILTERS) {
    if (key === "state") {
      const select = el("select", { name: "state" }, el("option", { value: "" }, "any"),
        STATES.map((s) => el("option", { value: s, selected: params.get("state") === s }, s)));
      form.append(el("label", {}, label, select));
    } else {
      form.append(el("label", {}, label, el("input", { name: key, value: params.get(key) || "",
        autocomplete: "off", size: 14 })));
    }
  }
  form.append(el("button", { type: "submit" }, "Show"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const wanted = new URLSearchParams();
    for (const [key, value] of new FormData(form)) if (String(value).trim()) {
      wanted.set(key, String(value).trim());
    }
    location.hash = `#/jobs${wanted.toString() ? `?${wanted}` : ""}`;
  });
  return form;
}

async function listJobs(params, token) {
  const selector = FILTERS.map(([key]) => [key, params.get(key)])
    .filter(([, v]) => v).map(([k, v]) => `${k}=${v}`).join(",");
  const query = { limit: String(PAGE_SIZE) };
  if (selector) query.fieldSelector = selector;
  if (token) query.continue = token;
  // like kubectl: the context's namespace unless asked for another, or for every one ("*")
  const asked = params.get("namespace") || session.namespace || "*";
  const namespace = asked === "*" ? "" : asked;
  if (namespace) {
    return { answer: await read(`${PREFIX}/namespaces/${encodeURIComponent(namespace)}/jobs`,
      query), namespace };
  }
  const every = await read(`${PREFIX}/jobs`, query);
  if (every.status !== 403 || !session.namespace) return { answer: every, namespace: "" };
  const notice = el("p", { class: "notice", "data-field": "namespace-notice" },
    `You may not list every namespace's jobs; showing namespace ${session.namespace}.`);
  return { answer: await read(`${PREFIX}/namespaces/${encodeURIComponent(session.namespace)}/jobs`,
    query), namespace: session.namespace, notice };
}

function jobsView(found, params, tokens) {
  const body = found.answer.body;
  const items = body.items || [];
  // ages at the time the reconciler decided (its clock, not this browser's)
  const decided = Date.parse((body.metadata && body.metadata.decidedAt) || "") || Date.now();
  const rows = items.map((j) => {
    const [namespace, binding] = String(j.binding).split("/", 2);
    const name = String(j.workload || "").split("/").pop() || binding;
    const clusters = (j.clusters || []).map((c) => `${c.name}×${c.replicas}`).join(", ");
    const href = `#/job/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}`;
    return el("tr", { "data-job": j.binding },
      el("th", { scope: "row" }, link(href, name)),
      cell(namespace), cell(j.queue || "-"),
      cell(stateBadge(j.state, Boolean(j.runningSince))),
      num(j.position ?? "-", "position"),
      el("td", { "data-field": "reason" }, j.reason || "-"),
      num(age(j.queuedAt, decided)), num(amount(gpus(j.demand)), "gpus"), cell(clusters || "-"));
  });
  const base = new URLSearchParams(params);
  base.delete("pages");
  const bar = pager("#/jobs", base, tokens, body);
  const where = found.namespace ? `namespace ${found.namespace}` : "every namespace";
  return [
    found.notice || "",
    table(`Jobs of ${where}, by binding name; position is the place in the queue.`,
      ["Job", "Namespace", "Queue", "State", "#Position", "Reason", "#Age", "#GPUs", "Clusters"],
      rows.length ? rows : [el("tr", {}, el("td", { colspan: 9, class: "muted" }, "no jobs"))],
      { "data-table": "jobs" }),
    bar,
  ];
}

// -- Job ----------------------------------------------------------------------------------

async function jobPage(main, route) {
  const [namespace, name] = route.parts;
  const region = start(main, `Job ${namespace}/${name}`);
  if (!namespace || !name) {
    fill(region, el("p", { class: "error" }, "A job's address is #/job/NAMESPACE/NAME."));
    return async () => {};
  }
  const path = `${PREFIX}/namespaces/${encodeURIComponent(namespace)}/jobs/${encodeURIComponent(name)}`;
  const refresh = async () => {
    const answer = await read(path);
    if (!answer.ok) {
      fill(region, problem(answer, `job ${namespace}/${name}`));
      return;
    }
    const job = answer.body;
    const events = await jobEvents(namespace, job);
    fill(region, ...jobView(namespace, name, job, events));
    updated(job);
  };
  await refresh();
  return refresh;
}

async function jobEvents(namespace, job) {
  const [qualified, , name] = String(job.workload || "").split("/");
  const kind = String(qualified || "").split(".")[0];  // Job.batch.volcano.sh: Kind.group
  if (!kind || !name) return { items: [], hidden: false };
  const answer = await read(`/api/v1/namespaces/${encodeURIComponent(namespace)}/events`,
    { fieldSelector: `involvedObject.name=${name},involvedObject.kind=${kind}` });
  if (!answer.ok) return { items: [], hidden: true };
  const items = (answer.body.items || []).slice();
  const stamp = (e) => String(e.lastTimestamp || e.eventTime || e.firstTimestamp || "");
  items.sort((a, b) => stamp(a).localeCompare(stamp(b)));
  return { items, hidden: false, stamp };
}

function jobView(namespace, name, job, events) {
  const admittedPods = (job.clusters || []).reduce((n, c) => n + Number(c.replicas || 0), 0);
  const running = Boolean(job.runningSince);
  const pods = Number(job.pods || 0) || admittedPods;
  const facts = el("dl", { class: "facts", "data-section": "job" },
    el("dt", {}, "State"), el("dd", {}, stateBadge(job.state, running)),
    el("dt", {}, "Reason"), el("dd", { "data-field": "reason" }, job.reason || "-"),
    el("dt", {}, "Message"), el("dd", { "data-field": "message" }, job.message || "-"),
    el("dt", {}, "Queue"), el("dd", {}, job.queue
      ? link(`#/jobs?queue=${encodeURIComponent(job.queue)}`, job.queue) : "-"),
    el("dt", {}, "Position"), el("dd", { "data-field": "position" }, job.position ?? "-"),
    el("dt", {}, "Priority"), el("dd", {}, job.priority ?? "-"),
    el("dt", {}, "GPUs"), el("dd", {}, amount(gpus(job.demand))),
    el("dt", {}, "Queued at"), el("dd", {}, when(job.queuedAt)),
    el("dt", {}, "Admitted at"), el("dd", {}, when(job.admittedAt)),
    el("dt", {}, "Template"), el("dd", {}, job.workload || "-"));
  const gang = el("p", { "data-field": "gang" },
    el("progress", { max: Math.max(1, pods), value: admittedPods,
      "aria-label": `${admittedPods} of ${pods} pods admitted` }),
    ` ${admittedPods} of ${pods} pods admitted` + (running ? ", running" : ""));
  const reasons = Object.entries(job.clusterReasons || {});
  const sections = [
    facts,
    el("h2", {}, "Gang"), gang,
    el("h2", {}, "Clusters"),
    (job.clusters || []).length
      ? table("Where its pods are placed.", ["Cluster", "#Pods"], job.clusters.map((c) =>
        el("tr", { "data-cluster": c.name }, el("th", { scope: "row" }, c.name), num(c.replicas))))
      : el("p", { class: "muted" }, "not placed"),
    reasons.length ? table("Why not each cluster.", ["Cluster", "Why not"], reasons.map(([c, why]) =>
      el("tr", { "data-cluster": c }, el("th", { scope: "row" }, c), cell(why))),
    { "data-table": "cluster-reasons" }) : null,
  ];
  if (job.group) {
    const g = job.group;
    sections.push(el("h2", {}, "Group"), el("p", { "data-field": "group" },
      `${g.name}: ${g.present} of ${g.size} members present, at least ${g.min} at once, ${g.state}`));
    const members = (job.groupMembers || []).map((m) => el("li", {}, `${m.binding}: ${m.state || "-"}`));
    if (members.length) sections.push(el("ul", {}, members));
  }
  if ((job.dependencies || []).length) {
    sections.push(el("h2", {}, "Dependencies"), dependencyGraph(name, job.dependencies));
  }
  sections.push(el("h2", {}, "Explanation"),
    el("pre", { class: "explain", "data-field": "explanation" }, job.explanation || ""));
  sections.push(el("h2", {}, "Events"), eventsView(events));
  sections.push(el("h2", {}, "What if"), el("p", {}, "The same, and what a policy change " +
    "would do to it, from a terminal:"),
  el("code", { class: "cmd" }, `fleetgate describe job ${namespace}/${name}`),
  el("code", { class: "cmd" }, `fleetgate dry-run --policies policies/ --kubeconfig $KUBECONFIG ` +
    `--explain ${namespace}/${name}`),
  el("code", { class: "cmd" }, "fleetgate diff --base policies/ --head PROPOSED/ " +
    "--kubeconfig $KUBECONFIG"));
  return sections;
}

function dependencyGraph(name, dependencies) {
  const rowHeight = 34;
  const height = Math.max(1, dependencies.length) * rowHeight + 6;
  const label = `${name} waits for: ` + dependencies.map((d) =>
    `${d.job} to be ${d.condition} (now ${d.state || "unknown"})`).join("; ");
  const graph = svg("svg", { class: "graph", viewBox: `0 0 620 ${height}`, role: "img",
    "aria-label": label, width: 620, height }, svg("title", {}, label));
  dependencies.forEach((d, i) => {
    const y = 4 + i * rowHeight;
    graph.append(svg("rect", { x: 2, y, width: 300, height: 26, rx: 4 }),
      svg("text", { x: 10, y: y + 17 }, `${d.job} (${d.state || "?"})`),
      svg("line", { x1: 302, y1: y + 13, x2: 420, y2: height / 2 }),
      svg("text", { x: 310, y: y + 10 }, d.condition));
  });
  graph.append(svg("rect", { x: 420, y: height / 2 - 13, width: 196, height: 26, rx: 4 }),
    svg("text", { x: 428, y: height / 2 + 4 }, name));
  return el("figure", { "data-field": "dependencies" }, graph,
    el("figcaption", { class: "muted" }, label));
}

function eventsView(events) {
  if (events.hidden) return el("p", { class: "muted" }, "Its Events are not readable with your access.");
  if (!events.items.length) return el("p", { class: "muted" }, "no Events");
  return el("ol", { "data-field": "events" }, events.items.map((e) =>
    el("li", {}, el("time", {}, when(events.stamp(e))), " ",
      el("span", { class: e.type === "Warning" ? "warn" : "" }, `${e.type || ""} ${e.reason || ""}`),
      `: ${e.message || ""}`, e.count > 1 ? ` (×${e.count})` : "")));
}

// -- start --------------------------------------------------------------------------------

window.addEventListener("hashchange", () => { show(); });
document.addEventListener("visibilitychange", () => { if (!document.hidden) show(); });
document.addEventListener("DOMContentLoaded", () => { show(); });
