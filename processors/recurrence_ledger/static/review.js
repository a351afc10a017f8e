// The review queue page: GET /review-queue?limit=&offset=[&scope=][&surface=],
// polled with If-None-Match. window.reviewView (read by the browser test):
// the rows shown.
"use strict";

(() => {
  // The filter form never submits (no inline handler: the page's CSP allows only its own scripts).
  document.addEventListener("DOMContentLoaded", () => {
    document.querySelectorAll("form.controls").forEach((form) => form.addEventListener("submit", (event) => event.preventDefault()));
  });

  const { getJSON, cell, emptyRow, revisionLabel, runLabel, timelineUrl, poll, params, refreshMs, stats } = window.rlCommon;
  const PAGE = 50;
  const $ = (selector) => document.querySelector(selector);
  const view = (window.reviewView = { rows: [], available: 0 });
  let offset = 0;
  $("#filter-scope").value = params.get("scope") || "";
  $("#filter-surface").value = params.get("surface") || "";

  function url() {
    const query = new URLSearchParams({ limit: String(PAGE), offset: String(offset) });
    const scope = $("#filter-scope").value.trim();
    if (scope) query.set("scope", scope);
    if ($("#filter-surface").value) query.set("surface", $("#filter-surface").value);
    return `/review-queue?${query}`;
  }

  function link(td, text, href) {
    td.textContent = "";
    const a = document.createElement("a");
    a.href = href;
    a.textContent = text;
    td.appendChild(a);
  }

  function render(queue) {
    view.available = queue.available;
    $("#queue-count").textContent = `${queue.available} of ${queue.total} open candidates`;
    $("#page-text").textContent = queue.available ? `${queue.offset + 1}–${queue.offset + queue.candidates.length} of ${queue.available}` : "";
    $("#prev").disabled = queue.offset === 0;
    $("#next").disabled = queue.offset + queue.candidates.length >= queue.available;
    const body = $("#queue tbody");
    body.replaceChildren();
    view.rows = [];
    if (queue.candidates.length === 0) emptyRow(body, "none: nothing waits for review");
    for (const item of queue.candidates) {
      const tr = document.createElement("tr");
      tr.dataset.candidate = item.candidate_id;
      cell(tr, item.published_at.replace("T", " ").replace(/\.\d+Z$/, " UTC"));
      link(cell(tr, ""), item.scope_id, `/#scope=${encodeURIComponent(item.scope_id)}`);
      link(cell(tr, ""), revisionLabel(item.artifact_ref), timelineUrl(item.scope_id, item.artifact_ref));
      cell(tr, item.signature_key);
      cell(tr, String(item.streak), "num");
      cell(tr, runLabel(item.run_start_position));
      cell(tr, item.failure_refs.map((ref) => `${ref.task_outcome_ref.source_id} ${ref.item_kind}[${ref.item_index}]`).join(", "));
      cell(tr, item.repair_surface, "flag");
      tr.title = item.reason;
      body.appendChild(tr);
      view.rows.push([item.scope_id, revisionLabel(item.artifact_ref), String(item.streak), runLabel(item.run_start_position),
        item.failure_refs.map((ref) => ref.task_outcome_ref.source_id)]);
    }
    stats.renders += 1;
  }

  const refresh = poll(async () => {
    const queue = await getJSON(url());
    if (queue.changed || stats.renders === 0) render(queue.body);
  }, refreshMs);
  let timer = null;
  $("#filter-scope").addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(() => { offset = 0; refresh(); }, 250); });
  $("#filter-surface").addEventListener("change", () => { offset = 0; refresh(); });
  $("#prev").addEventListener("click", () => { offset = Math.max(0, offset - PAGE); refresh(); });
  $("#next").addEventListener("click", () => { offset += PAGE; refresh(); });
})();
