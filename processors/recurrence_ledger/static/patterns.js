// The team patterns page: GET /patterns?group=…&min_scopes=… polled with
// If-None-Match (history-common.js), its columns from GET /field-catalogue
// (the "pattern" fields: a SignaturePattern's fields as the ledger states
// them, in the record's order; the group is the page's own). Every value is
// the API's, shown with textContent; nothing is recomputed or re-decided.
// window.patternsView (read by the browser test): the group shown, the
// columns and the rows as shown.
"use strict";

(() => {
  const { getJSON, cell, emptyRow, poll, params, refreshMs } = window.rlCommon;
  const $ = (selector) => document.querySelector(selector);
  const view = (window.patternsView = { group: null, columns: [], rows: [], total: null });
  const LIMIT = 100; // the API's largest page
  $("#group-input").value = params.get("group") || "";
  $("#min-scopes").value = params.get("min_scopes") || "1";

  // The columns: the catalogue's pattern fields but the group (the page's heading).
  let columns = null;
  async function loadColumns() {
    if (columns) return;
    const answer = await getJSON("/field-catalogue");
    columns = Object.entries(answer.body.pattern).filter(([name]) => name !== "group");
    const head = $("#patterns thead tr");
    head.textContent = "";
    for (const [name, label] of columns) {
      const th = document.createElement("th");
      th.scope = "col";
      th.dataset.field = name;
      th.textContent = label.title;
      th.title = label.description || "";
      head.appendChild(th);
    }
    view.columns = columns.map(([name]) => name);
  }

  const shown = (value) => (Array.isArray(value) ? value.join(", ") : String(value));
  const quoted = (text) => `'${text.replace(/'/g, "'\\''")}'`; // a shell word

  function url() {
    const query = new URLSearchParams({ group: $("#group-input").value.trim(), limit: String(LIMIT) });
    const least = Number($("#min-scopes").value);
    if (least > 1) query.set("min_scopes", String(least));
    return `/patterns?${query}`;
  }

  function render(body) {
    view.group = body.group;
    view.total = body.total;
    $("#group-name").textContent = body.group === "" ? "the deployment (no group separator)" : `group ${body.group}`;
    $("#pattern-count").textContent =
      `${body.available} of the group's ${body.total} pattern${body.total === 1 ? "" : "s"} with at least ${body.min_scopes} scope${body.min_scopes === 1 ? "" : "s"}` +
      (body.available > body.patterns.length ? ` (the first ${body.patterns.length} shown)` : "");
    $("#export-command").value = `recurrence-ledger patterns export --group ${quoted(body.group)} --format skill`;
    const tbody = $("#patterns tbody");
    tbody.textContent = "";
    view.rows = [];
    if (!body.patterns.length) emptyRow(tbody, "No signature has recurred in a scope of this group.");
    for (const pattern of body.patterns) {
      const tr = document.createElement("tr");
      const row = {};
      for (const [name] of columns) {
        row[name] = shown(pattern[name]);
        cell(tr, row[name], typeof pattern[name] === "number" ? "num" : undefined);
      }
      tbody.appendChild(tr);
      view.rows.push(row);
    }
  }

  async function refresh() {
    await loadColumns();
    const answer = await getJSON(url());
    if (answer.changed && answer.body) render(answer.body);
  }

  const tick = poll(refresh, refreshMs);
  $("#group-form").addEventListener("submit", (event) => {
    event.preventDefault(); // never a navigation: the URL is updated in place
    const query = new URLSearchParams(location.search);
    query.set("group", $("#group-input").value.trim());
    query.set("min_scopes", String(Math.max(1, Number($("#min-scopes").value) || 1)));
    history.replaceState(null, "", `${location.pathname}?${query}`);
    tick();
  });
})();
