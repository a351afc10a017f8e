// The dashboard's unknown parts (contract §17; loaded before dashboard.js, which calls them):
// - window.rlUnknown.render(record, byUnknown, suspects, threshold): the scope's unknown selections by
//   reason, each revision's (GET /scopes/{scope}/revisions?sort=unknown) as a stacked bar chart and a
//   table, and the binding suspects (…/revisions?binding_suspect=true) with one line each on what to fix;
// - window.rlUnknown.explain(row): that line for a revision row;
// - window.rlUnknown.load(reasons): the reasons of GET /field-catalogue, before the first render.
// Every count, reason and sentence comes from the API.
"use strict";

(() => {
  const { cell, emptyRow, revisionLabel } = window.rlCommon;
  const $ = (selector) => document.querySelector(selector);

  // The eleven reasons of contract §17 in the contract's order, each with its title, description, family and
  // whether it makes a binding suspect: the ledger's own statement (GET /field-catalogue, from
  // recurrence_ledger/ledger/records.py), given to load() before the first render. The page spells no reason.
  let REASONS = [];
  let CATALOGUE = {};
  const SUSPECT = (reason) => Boolean((CATALOGUE[reason] || {}).suspect);
  // Colours by family, in the family's order: matching (violet), condition (ochre), check (red to orange).
  const PALETTES = {
    matching: ["#5b3a8c", "#9a7cc4"],
    condition: ["#6b4f12", "#8a6d1f", "#b8953a", "#dcc27a"],
    check: ["#7f1d1d", "#b3261e", "#d9534f", "#e07b39", "#f0b27a"],
  };
  let COLORS = {};

  const selections = (n) => (n === 1 ? "1 unknown selection" : `${n} unknown selections`);
  // What happened in the revision's n unknown selections with this reason, and what to fix (the reason's description).
  const sentence = (reason, n) => `${selections(n)}: ${(CATALOGUE[reason] || {}).description || reason}`;

  // The catalogue's unknown_reasons (GET /field-catalogue): the reasons, their order, families and sentences.
  function load(reasons) {
    CATALOGUE = reasons;
    REASONS = Object.keys(reasons);
    const used = {};
    COLORS = Object.fromEntries(REASONS.map((reason) => {
      const family = reasons[reason].family;
      const palette = PALETTES[family] || ["#777777"];
      used[family] = (used[family] || 0) + 1;
      return [reason, palette[(used[family] - 1) % palette.length]];
    }));
  }

  // [reason, count] of the reasons that occurred, in the contract's order.
  const occurred = (reasons) => REASONS.map((reason) => [reason, (reasons || {})[reason] || 0]).filter(([, n]) => n > 0);

  // What to fix for a binding suspect: the sentence of its most frequent suspect reason (ties in the
  // contract's order), and the other reasons that occurred. {reason, text, also} or null.
  function explain(row) {
    const present = occurred(row.unknown_reasons);
    const suspect = present.filter(([reason]) => SUSPECT(reason));
    const pool = suspect.length ? suspect : present;
    if (!pool.length) return null;
    const [reason, n] = pool.reduce((best, item) => (item[1] > best[1] ? item : best));
    const also = present.filter(([other]) => other !== reason).map(([other, count]) => `${other} ${count}`).join(", ");
    return { reason, text: sentence(reason, n), also };
  }

  // The chips of a reasons object: "check_missing 1", each titled with its sentence.
  function chips(parent, reasons) {
    parent.replaceChildren();
    for (const [reason, n] of occurred(reasons)) {
      const chip = document.createElement("span");
      chip.className = `reason ${SUSPECT(reason) ? "suspect-reason" : ""}`.trim();
      chip.dataset.reason = reason;
      chip.textContent = `${reason} ${n}`;
      chip.title = sentence(reason, n);
      chip.style.borderLeftColor = COLORS[reason]; // CSSOM, allowed by the page's CSP (no inline style attribute)
      parent.appendChild(chip);
    }
  }

  let chart = null;
  function renderChart(rows) {
    const box = $(".unknown-box");
    box.hidden = rows.length === 0;
    box.style.height = `${Math.max(140, 90 + 36 * rows.length)}px`; // bars plus the legend below them
    const labels = rows.map((row) => `${revisionLabel(row.artifact_ref)} · ${row.signature_key}`);
    const datasets = REASONS.filter((reason) => rows.some((row) => (row.unknown_reasons || {})[reason] > 0)).map((reason) => ({
      label: reason, data: rows.map((row) => (row.unknown_reasons || {})[reason] || 0), backgroundColor: COLORS[reason], barPercentage: 0.7,
    }));
    if (chart === null) {
      chart = new Chart($("#unknown-chart"), {
        type: "bar",
        data: { labels, datasets },
        options: {
          indexAxis: "y", animation: false, maintainAspectRatio: false,
          plugins: { legend: { position: "bottom", labels: { boxWidth: 12 } }, tooltip: { callbacks: { footer: (items) => (items.length ? sentence(items[0].dataset.label, items[0].raw) : "") } } },
          scales: {
            x: { stacked: true, beginAtZero: true, ticks: { precision: 0 }, title: { display: true, text: "unknown selections" } },
            y: { stacked: true, ticks: { autoSkip: false } },
          },
        },
      });
    } else {
      chart.data.labels = labels;
      chart.data.datasets = datasets;
      chart.update("none");
    }
  }

  function renderSuspects(record, list, threshold) {
    const body = $("#suspects tbody");
    body.replaceChildren();
    const count = record[$("#suspect-count").dataset.counter] ?? 0; // the figure index.html gives this place
    $("#suspect-count").textContent = String(count);
    $("#suspect-threshold").textContent = String(threshold ?? "?");
    $(".suspects-panel").classList.toggle("alert", count > 0);
    $("#suspects-incomplete").hidden = list.revisions.length >= count;
    if (list.revisions.length === 0) emptyRow(body, `none: no revision without a verdict has ${threshold ?? "?"} unknown selections its binding explains`);
    for (const row of list.revisions) {
      const tr = document.createElement("tr");
      tr.className = "suspect";
      tr.dataset.revision = revisionLabel(row.artifact_ref);
      cell(tr, revisionLabel(row.artifact_ref));
      cell(tr, row.signature_key);
      cell(tr, String(row.unknown ?? 0), "num");
      const fix = explain(row);
      const td = cell(tr, fix ? fix.text : "–", "fix");
      if (fix) td.dataset.reason = fix.reason;
      if (fix && fix.also) {
        const also = document.createElement("span");
        also.className = "also";
        also.textContent = ` (also ${fix.also})`;
        td.appendChild(also);
      }
      body.appendChild(tr);
    }
  }

  function renderTable(rows, list) {
    const body = $("#unknown tbody");
    body.replaceChildren();
    $("#unknown-shown").textContent = `${rows.length} revision${rows.length === 1 ? "" : "s"} with unknown selections, most first (of ${list.total ?? list.revisions.length})`;
    if (rows.length === 0) emptyRow(body, "none: every selection of this scope has a terminal verdict");
    for (const row of rows) {
      const tr = document.createElement("tr");
      tr.dataset.revision = revisionLabel(row.artifact_ref);
      if (row.binding_suspect) tr.classList.add("suspect");
      cell(tr, revisionLabel(row.artifact_ref));
      cell(tr, row.signature_key);
      cell(tr, String(row.unknown ?? 0), "num").dataset.field = "unknown";
      cell(tr, String(row.ambiguous ?? 0), "num").dataset.field = "ambiguous";
      chips(cell(tr, "", "reasons"), row.unknown_reasons);
      cell(tr, row.binding_suspect ? "binding suspect" : "", "flag");
      body.appendChild(tr);
    }
  }

  window.rlUnknown = {
    load,
    reasons: () => REASONS,
    explain,
    // record: the scope's ScopeStatistics; byUnknown: /revisions?sort=unknown; suspects:
    // /revisions?binding_suspect=true; threshold: the workers' review threshold (binding_suspect uses it).
    render(record, byUnknown, suspects, threshold) {
      chips($("#scope-reasons"), record.unknown_reasons);
      $("#no-scope-reasons").hidden = (record.unknown ?? 0) > 0;
      const rows = byUnknown.revisions.filter((row) => (row.unknown ?? 0) > 0);
      renderChart(rows);
      renderTable(rows, byUnknown);
      renderSuspects(record, suspects, threshold);
    },
  };
})();
