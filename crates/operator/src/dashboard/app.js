// Arbiter's dashboard: polls api/state and renders it. Every string from
// the API (object names, messages) goes through textContent, never HTML.
"use strict";

const POLL_MS = 3000;
// "namespace/name" of the workload shown in detail; the URL's fragment
// (#namespace/name) names it, so a link shows one workload's history.
let selected = decodeURIComponent(location.hash.slice(1)) || null;
let last = null;
let timer = null;

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function row(cells) {
  const tr = el("tr");
  for (const c of cells) {
    tr.appendChild(c instanceof Node ? wrap(c) : el("td", c));
  }
  return tr;
}

function wrap(node) {
  const td = el("td");
  td.appendChild(node);
  return td;
}

function fill(id, rows) {
  const body = document.querySelector("#" + id + " tbody");
  body.replaceChildren(...rows);
}

function bar(r) {
  const box = el("div", null, "usage");
  const pct = r.percent === undefined ? 0 : Math.min(r.percent, 100);
  const fillBar = el("div", null, r.percent > 100 ? "bar over" : "bar");
  fillBar.style.width = pct + "%";
  box.appendChild(fillBar);
  const label = r.usage + " / " + r.nominal + (r.percent === undefined ? "" : " (" + r.percent + "%)");
  box.appendChild(el("span", label));
  return box;
}

function quotaList(resources) {
  const ul = el("ul", null, "quota");
  for (const r of resources) {
    const li = el("li");
    li.appendChild(el("span", r.flavor + " " + r.resource + ": ", "muted"));
    li.appendChild(bar(r));
    ul.appendChild(li);
  }
  return ul;
}

function treeNode(node) {
  const li = el("li", null, node.kind === "Cohort" ? "cohort" : "cq");
  li.appendChild(el("span", node.kind, "kind"));
  li.appendChild(el("span", node.name, "name"));
  if (node.resources.length) li.appendChild(quotaList(node.resources));
  if (node.children.length) {
    const ul = el("ul");
    for (const c of node.children) ul.appendChild(treeNode(c));
    li.appendChild(ul);
  }
  return li;
}

function renderTree(tree) {
  const ul = el("ul", null, "tree");
  for (const n of tree) ul.appendChild(treeNode(n));
  document.getElementById("tree").replaceChildren(ul);
}

function renderQueues(state) {
  const rows = [];
  for (const cq of state.clusterQueues) {
    const resources = cq.resources.length ? cq.resources : [null];
    resources.forEach((r, i) => {
      const first = i === 0;
      rows.push(row([
        first ? cq.name : "",
        first ? (cq.cohort || "") : "",
        first ? (cq.stopPolicy ? cq.active + " (" + cq.stopPolicy + ")" : cq.active) : "",
        first ? cq.pending : "",
        first ? cq.admitted : "",
        r ? r.flavor : "",
        r ? r.resource : "",
        r ? bar(r) : "",
        r ? r.borrowed : "",
      ]));
    });
  }
  fill("cluster-queues", rows);
  fill("local-queues", state.localQueues.map((lq) => row([
    lq.namespace, lq.name, lq.clusterQueue, lq.pending, lq.admitted, lq.stopPolicy || "",
  ])));
}

function renderWorkloads(state) {
  fill("workloads", state.workloads.map((w) => {
    const link = el("a", w.name);
    link.href = "#" + encodeURIComponent(w.namespace + "/" + w.name);
    const tr = row([w.namespace, link, w.queue, w.clusterQueue || "", w.state,
      w.position || "", w.reason, w.message, w.policy || ""]);
    tr.className = "state-" + w.state.toLowerCase();
    return tr;
  }));
  const shown = state.workloads.length;
  document.getElementById("workloads-count").textContent =
    shown + " shown of " + state.workloadsMatching + " matching (" + state.workloadsTotal + " in all)" +
    (shown < state.workloadsMatching ? "; filter to see the others" : "");
}

// The operator's clock is Unix time in seconds.
function when(seconds) {
  return new Date(seconds * 1000).toISOString().replace(".000Z", "Z");
}

function decisionRow(d) {
  const result = typeof d.result === "string" ? d.result : JSON.stringify(d.result);
  return row([
    d.lastAtSeconds !== undefined ? when(d.atSeconds) + " – " + when(d.lastAtSeconds) : when(d.atSeconds),
    d.tenant ? d.bundle + " (tenant " + d.tenant + ")" : d.bundle,
    d.policy, d.hook, d.mode, d.workload || d.subject || "", result,
    d.reason || "", d.repeats ? d.repeats + 1 : 1,
  ]);
}

// The selected workload's detail, fetched on selection and with each poll.
async function renderDetail() {
  const box = document.getElementById("workload-detail");
  if (!selected || selected.indexOf("/") < 0) {
    box.hidden = true;
    return;
  }
  const [namespace, name] = [selected.slice(0, selected.indexOf("/")), selected.slice(selected.indexOf("/") + 1)];
  const query = "namespace=" + encodeURIComponent(namespace) + "&name=" + encodeURIComponent(name);
  let d;
  try {
    const response = await fetch("api/workload?" + query, { cache: "no-store" });
    if (!response.ok) throw new Error(response.status + " " + (await response.text()));
    d = await response.json();
  } catch (e) {
    box.hidden = false;
    document.getElementById("workload-title").textContent = "Workload " + selected;
    document.getElementById("workload-message").textContent = "cannot show it: " + e.message;
    return;
  }
  const w = d.workload;
  box.hidden = false;
  document.getElementById("workload-title").textContent =
    "Workload " + w.namespace + "/" + w.name + ": " + w.state;
  document.getElementById("workload-message").textContent =
    (w.reason ? w.reason + ": " : "") + w.message + (w.policy ? " (policy " + w.policy + ")" : "");
  document.getElementById("workload-flavors").textContent =
    (w.job ? "Job: " + w.job + ". " : "") + (w.flavors.length ? "Flavors: " + w.flavors.join("; ") : "");
  document.getElementById("workload-errors").replaceChildren(...d.errors.map((e) => el("li", e)));
  fill("workload-conditions", d.conditions.map((c) => row([c.type, c.status, c.reason, c.message, c.time])));
  fill("workload-events", d.events.map((e) => row([e.time, e.type, e.reason, e.message, e.count])));
  document.getElementById("workload-decisions-section").hidden = d.decisions === undefined;
  fill("workload-decisions", (d.decisions || []).map(decisionRow));
}

function render(state) {
  last = state;
  document.getElementById("errors").replaceChildren(...state.errors.map((e) => el("li", e)));
  renderTree(state.tree);
  renderQueues(state);
  renderWorkloads(state);
  renderDetail();
  fill("bundles", state.bundles.map((b) => {
    const tr = row([b.namespace, b.name, b.result, b.status]);
    tr.className = "bundle-" + b.result;
    return tr;
  }));
  // Only the operator's admin port knows its engine's bundles.
  document.getElementById("engine-section").hidden = state.engine.length === 0;
  fill("engine", state.engine.map((b) => row([
    b.source, b.name, b.version, b.digest,
    b.lastReloadOk === false ? "rejected (this one stays)" : (b.lastReloadOk ? "ok" : ""),
  ])));
  // Only the operator knows its engine's decisions.
  document.getElementById("decisions-section").hidden = state.decisions === undefined;
  fill("decisions", (state.decisions || []).map(decisionRow));
  fill("flavors", state.flavors.map((f) => row([
    f.name, Object.entries(f.nodeLabels).map(([k, v]) => k + "=" + v).join(", "),
  ])));
  document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
}

// The workloads' filter, from the form: ?namespace=&clusterQueue=&state=.
function filterQuery() {
  const params = new URLSearchParams();
  for (const id of ["namespace", "clusterQueue", "state"]) {
    const value = document.getElementById("filter-" + id).value.trim();
    if (value) params.set(id, value);
  }
  const query = params.toString();
  return query ? "?" + query : "";
}

async function poll() {
  try {
    const response = await fetch("api/state" + filterQuery(), { cache: "no-store" });
    if (!response.ok) throw new Error(response.status + " " + (await response.text()));
    render(await response.json());
  } catch (e) {
    document.getElementById("updated").textContent = "cannot refresh: " + e.message;
  }
  timer = setTimeout(poll, POLL_MS);
}

window.addEventListener("hashchange", () => {
  selected = decodeURIComponent(location.hash.slice(1)) || null;
  renderDetail();
});

document.getElementById("filter").addEventListener("submit", (e) => {
  e.preventDefault();
  clearTimeout(timer);
  poll();
});

poll();
