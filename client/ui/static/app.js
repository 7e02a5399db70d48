// odradek ui: polls /api/snapshot every second and renders it. No framework, no build step.
"use strict";
const POLL_MS = 1000;
const $ = (id) => document.getElementById(id);
const esc = (v) => String(v ?? "").replace(/[&<>"']/g, (c) =>
  ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
const num = (v) => (v === null || v === undefined) ? "–" : Number(v).toLocaleString("en-US");

function bytes(n) {
  if (n === null || n === undefined) return "–";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"]; let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + " " + u[i];
}

function sparkline(points, color) {
  const w = 220, h = 28;
  if (!points || points.length < 2) return `<svg class="spark" width="${w}" height="${h}"></svg>`;
  const max = Math.max(...points, 1e-9);
  const step = w / (points.length - 1);
  const xy = points.map((v, i) => `${(i * step).toFixed(1)},${(h - 2 - (v / max) * (h - 4)).toFixed(1)}`);
  return `<svg class="spark" width="${w}" height="${h}" viewBox="0 0 ${w} ${h}">` +
    `<polyline fill="none" stroke="${color}" stroke-width="1.5" points="${xy.join(" ")}"/></svg>`;
}

function rate(points, unit) {
  const last = points && points.length ? points[points.length - 1] : null;
  if (last === null) return "–";
  return unit === "B" ? bytes(last) + "/s" : last.toFixed(1) + " msg/s";
}

function renderSummary(s) {
  const card = (n, l, cls, key) => `<div class="card ${cls}" data-summary="${key}"><div class="n">${n}</div><div class="l">${l}</div></div>`;
  $("summary").innerHTML = [
    card(s.summary.brokers, "brokers up", s.summary.brokers_down ? "bad" : "", "brokers"),
    card(s.controller ?? "none", "controller", s.controller === null ? "bad" : "", "controller"),
    card(s.summary.topics, "topics", "", "topics"),
    card(s.summary.partitions, "partitions", "", "partitions"),
    card(s.summary.under_replicated, "under-replicated", s.summary.under_replicated ? "warn" : "", "under_replicated"),
    card(s.summary.offline, "offline", s.summary.offline ? "bad" : "", "offline"),
    card(s.summary.groups, "consumer groups", "", "groups"),
    card(s.summary.reassignments, "reassignments", s.summary.reassignments ? "warn" : "", "reassignments"),
  ].join("");
}

function renderBrokers(s) {
  const status = {up: ["ok", "up"], unreachable: ["bad", "unreachable"], gone: ["bad", "gone"]};
  $("brokers").innerHTML = s.brokers.map((b) => {
    const [cls, label] = status[b.status];
    const t = b.throughput || {};
    const series = t.series || {};
    const graphs = t.endpoint && !t.error
      ? `<div class="spark-label">in ${rate(series.messages_in)} · ${rate(series.bytes_in, "B")}</div>` +
        sparkline(series.messages_in, "#2563eb") +
        `<div class="spark-label">out ${rate(series.bytes_out, "B")}</div>` + sparkline(series.bytes_out, "#7c3aed")
      : `<div class="nometrics" data-metrics="none">no throughput: ${esc(t.error || "no metrics endpoint")}</div>`;
    return `<div class="broker ${b.status}" data-broker="${b.id}" data-status="${b.status}">
      <div><span class="id">broker ${b.id}</span> <span class="pill ${cls}">${label}</span>
      ${b.controller ? '<span class="pill ctl" data-controller="true">controller</span>' : ""}</div>
      <div class="addr">${esc(b.address || "")}${b.rack ? " · rack " + esc(b.rack) : ""}</div>
      <div class="facts">${b.replicas} replicas · ${b.leaders} leaders${b.log_size === null ? "" : " · " + bytes(b.log_size) + " on disk"}</div>
      ${b.error ? `<div class="nometrics">${esc(b.error)}</div>` : ""}
      ${graphs}</div>`;
  }).join("") || '<div class="empty">no brokers</div>';
}

function renderZookeeper(s) {
  $("zookeeper").innerHTML = "<tr><th>member</th><th>mode</th></tr>" + s.zookeeper.members.map((m) =>
    `<tr data-zk="${esc(m.address)}"><td>${esc(m.address)}</td><td><span class="pill ${m.ok ? "ok" : "bad"}">${esc(m.mode || "down")}</span></td></tr>`
  ).join("");
}

function replicaList(list, isr, leader) {
  return list.map((r) => {
    const style = r === leader ? "font-weight:700" : (isr && !isr.includes(r) ? "color:#dc2626" : "");
    return `<span style="${style}">${r}</span>`;
  }).join(", ");
}

const expanded = new Set();  // internal topics are folded until clicked
function toggleTopic(name) { expanded.has(name) ? expanded.delete(name) : expanded.add(name); render(last); }
let last = null;

function renderTopics(s) {
  const head = `<tr><th>topic / partition</th><th>leader</th><th>replicas</th><th>ISR</th><th>state</th>
    <th class="num">log start</th><th class="num">log end</th><th class="num">size</th></tr>`;
  const rows = s.topics.map((t) => {
    const flags = (t.offline ? `<span class="pill bad">${t.offline} offline</span> ` : "") +
      (t.under_replicated ? `<span class="pill warn">${t.under_replicated} under-replicated</span>` : "") ||
      '<span class="pill ok">healthy</span>';
    const open = !t.internal || expanded.has(t.name);
    const fold = t.internal ? `<span class="fold">${open ? "▾" : "▸"}</span> ` : "";
    const top = `<tr class="topic${t.internal ? " foldable" : ""}" data-topic="${esc(t.name)}"><td>${fold}${esc(t.name)}${t.internal ? ' <span class="muted">(internal)</span>' : ""}${t.deleting ? ' <span class="pill bad">deleting</span>' : ""}</td>
      <td colspan="3" class="muted">${t.partitions.length} partition${t.partitions.length === 1 ? "" : "s"} · RF ${t.replication_factor}</td><td>${flags}</td>
      <td></td><td class="num">${t.messages === null ? "" : num(t.messages) + " msgs"}</td><td class="num">${bytes(t.size)}</td></tr>`;
    const parts = !open ? "" : t.partitions.map((p) => {
      const cls = p.offline ? "offline" : p.under_replicated ? "urp" : "";
      const state = p.offline ? '<span class="pill bad">offline</span>'
        : p.under_replicated ? '<span class="pill warn">under-replicated</span>' : '<span class="pill ok">in sync</span>';
      const moves = p.reassigning ? [...p.reassigning.adding.map((r) => "+" + r), ...p.reassigning.removing.map((r) => "−" + r)] : [];
      const moving = p.reassigning ? ` <span class="pill warn">moving ${moves.join(" ")}</span>` : "";
      return `<tr class="${cls}" data-tp="${esc(t.name)}-${p.partition}" data-urp="${p.under_replicated}" data-offline="${p.offline}">
        <td>&nbsp;&nbsp;${p.partition}</td><td>${p.leader ?? "none"}</td><td>${replicaList(p.replicas, p.isr, p.leader)}</td>
        <td>${p.isr.join(", ")}</td><td>${state}${moving}</td><td class="num">${num(p.start_offset)}</td>
        <td class="num" data-end="${p.end_offset ?? ""}">${num(p.end_offset)}</td><td class="num">${bytes(p.size)}</td></tr>`;
    }).join("");
    return top + parts;
  }).join("");
  $("topics").innerHTML = s.topics.length ? head + rows : '<tr><td class="empty">no topics</td></tr>';
  for (const row of document.querySelectorAll("tr.foldable")) row.onclick = () => toggleTopic(row.dataset.topic);
}

function renderGroups(s) {
  $("groups").innerHTML = s.groups.map((g) => {
    const stateCls = g.state === "Stable" ? "ok" : g.state === "Empty" ? "" : "warn";
    const rows = g.partitions.map((p) => `<tr data-group-tp="${esc(g.group_id)}/${esc(p.topic)}-${p.partition}">
      <td>${esc(p.topic)}</td><td class="num">${p.partition}</td><td class="num">${num(p.committed)}</td>
      <td class="num">${num(p.end_offset)}</td><td class="num ${p.lag ? "lag-pos" : ""}" data-lag="${p.lag ?? ""}">${num(p.lag)}</td>
      <td class="muted">${esc(p.owner || "–")}</td></tr>`).join("");
    const members = g.members.map((m) => `<div class="muted">${esc(m.client_id)} @ ${esc(m.host)}: ${esc(m.assignment.join(", ") || "nothing assigned")}</div>`).join("");
    return `<div class="group" data-group="${esc(g.group_id)}" data-state="${esc(g.state)}" data-total-lag="${g.total_lag ?? ""}">
      <div class="head"><span class="name">${esc(g.group_id)}</span><span class="pill ${stateCls}">${esc(g.state)}</span>
      <span class="muted">${g.members.length} member${g.members.length === 1 ? "" : "s"} · coordinator ${g.coordinator ?? "?"} · ${esc(g.protocol || "no assignor")}</span>
      <span>total lag <b>${num(g.total_lag)}</b></span></div>${members}
      ${rows ? `<table><tr><th>topic</th><th class="num">partition</th><th class="num">committed</th><th class="num">log end</th><th class="num">lag</th><th>member</th></tr>${rows}</table>` : ""}</div>`;
  }).join("") || '<div class="empty">no consumer groups</div>';
}

function renderReassignments(s) {
  $("reassignments").innerHTML = s.reassignments.length
    ? "<tr><th>partition</th><th>replicas</th><th>adding</th><th>removing</th></tr>" + s.reassignments.map((r) =>
      `<tr data-reassignment="${esc(r.topic)}-${r.partition}"><td>${esc(r.topic)}-${r.partition}</td><td>${r.replicas.join(", ")}</td>
       <td>${r.adding.join(", ")}</td><td>${r.removing.join(", ")}</td></tr>`).join("")
    : '<tr><td class="empty">none</td></tr>';
}

function render(s) {
  last = s;
  $("errors").innerHTML = s.errors.map((e) =>
    `<div class="error" data-error="${esc(e.source)}"><b>${esc(e.source)}</b>: ${esc(e.message)}</div>`).join("");
  renderSummary(s); renderBrokers(s); renderZookeeper(s); renderTopics(s); renderGroups(s); renderReassignments(s);
  const st = $("status");
  st.className = "status" + (s.age > 10 ? " stale" : "");
  st.textContent = `live · updated ${new Date(s.taken_at * 1000).toLocaleTimeString()} · ZooKeeper ${s.zookeeper.connect}`;
  document.body.dataset.cycle = s.cycle;
}

async function poll() {
  try {
    const resp = await fetch("api/snapshot", {cache: "no-store"});
    if (!resp.ok) throw new Error("HTTP " + resp.status);
    render(await resp.json());
  } catch (err) {
    const st = $("status");
    st.className = "status stale";
    st.textContent = "the ui server does not answer (" + err.message + ") — retrying";
  }
  setTimeout(poll, POLL_MS);
}
poll();
