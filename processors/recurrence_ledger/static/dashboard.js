// recurrence-ledger dashboard: reads GET /scopes and, for the selected scope,
// GET /scopes/{scope}/statistics, /revisions?sort=streak&limit=N (every
// revision of the scope: the table shows the first N with their yield, the
// chart those with a streak), /review-candidates, and for the unknown
// selections by reason and the binding suspects (contract §17,
// dashboard-unknown.js) /revisions?sort=unknown&limit=N and
// /revisions?binding_suspect=true, and for the lessons' effect (contract
// §21.4, dashboard-effect.js) /revisions?sort=probability_helps; polls them every
// REFRESH_MS with If-None-Match, so an
// unchanged view costs a 304 and no rendering. Every value shown comes from
// the API (the Redis view): nothing is recomputed here.
//
// Query parameters: refresh=<ms> (default 3000, minimum 250), limit=<1–100>
// (bars in the chart, default 10). The selected scope is in the URL fragment
// (#scope=<id>). window.dashboardStats counts polls, 304s, renders, errors
// and 401s (the browser test reads it).
//
// The API token (serve with RL_API_TOKEN or --token-file): when the API
// answers 401 the page stops polling, hides the view and asks for the token
// (login.js, which says why a Bearer header and sessionStorage). "forget
// token" forgets it.
"use strict";

(() => {
  const params = new URLSearchParams(location.search);
  const REFRESH_MS = Math.max(250, Number(params.get("refresh")) || 3000);
  const LIMIT = Math.min(100, Math.max(1, Number(params.get("limit")) || 10));
  const COLORS = { fact: "#2f5d9b", review: "#b3261e" };

  const stats = (window.dashboardStats = { polls: 0, notModified: 0, renders: 0, errors: 0, unauthorized: 0, lastError: null });
  // GET url as JSON (history-common.js), counted in window.dashboardStats.
  const { jsonClient, Unauthorized, cell, emptyRow, revisionLabel } = window.rlCommon;
  const { storedToken, setStatus } = window.rlLogin;
  const getJSON = jsonClient(stats);
  let selected = decodeURIComponent((location.hash.match(/^#scope=(.*)$/) || [])[1] || "");
  let chart = null;

  const $ = (selector) => document.querySelector(selector);

  // yield with 2 decimals, "–" without terminal verdicts, " low" when low_yield.
  const yieldLabel = (row) => (row.yield === null || row.yield === undefined ? "–" : row.yield.toFixed(2) + (row.low_yield ? " low" : ""));
  const surfaceLabel = (row) => row.repair_surface ?? "–";

  function renderScopes(list) {
    const body = $("#scopes tbody");
    body.replaceChildren();
    $("#no-scopes").hidden = list.scopes.length > 0;
    const total = list.total ?? list.scopes.length;
    $("#more-scopes").hidden = total <= list.scopes.length;
    $("#more-scopes").textContent = `The first ${list.scopes.length} of ${total} scopes.`;
    if (window.rlScopes) window.rlScopes.pager(list);
    for (const scope of list.scopes) {
      const row = document.createElement("tr");
      row.dataset.scope = scope.scope_id;
      if (scope.scope_id === selected) row.classList.add("selected");
      cell(row, scope.scope_id);
      // The columns are the page's (index.html: <th data-label="field">, data-alert: red when > 0).
      for (const th of document.querySelectorAll("#scopes th[data-label]")) {
        const name = th.dataset.label;
        // ?? 0: a record written before a figure existed does not have it
        cell(row, String(scope[name] ?? 0), th.hasAttribute("data-alert") && scope[name] > 0 ? "num alert" : "num").dataset.field = name;
      }
      row.addEventListener("click", () => select(scope.scope_id));
      body.appendChild(row);
    }
  }

  // The labels of the scope table and the unknown reasons, as the ledger's records state them
  // (GET /field-catalogue): read once; a <th data-label="field"> gets the field's title and description.
  let catalogue = null;
  async function loadCatalogue() {
    if (catalogue) return;
    const answer = await getJSON("/field-catalogue");
    if (!answer.body) return;
    catalogue = answer.body;
    window.rlUnknown.load(catalogue.unknown_reasons);
    window.rlEffect.load(catalogue.effect);
    for (const th of document.querySelectorAll("th[data-label]")) {
      const label = catalogue.scope[th.dataset.label];
      if (!label) continue;
      th.textContent = label.title;
      th.title = label.description || "";
    }
  }

  function renderStatistics(record) {
    $("#scope-name").textContent = record.scope_id;
    $("#scope-as-of").textContent = String(record.as_of_position);
    for (const node of document.querySelectorAll("#detail [data-counter]")) {
      node.textContent = String(record[node.dataset.counter] ?? 0); // the counters of revision 3 are 0 in older records
    }
    // Red only when something needs review, or a revision is a binding suspect.
    const needing = record.needing_review > 0;
    $('#detail [data-counter="needing_review"]').classList.toggle("alert", needing);
    for (const node of document.querySelectorAll("#detail [data-counter][data-alert]")) {
      node.classList.toggle("alert", (record[node.dataset.counter] ?? 0) > 0);
    }
    $(".review-panel").classList.toggle("alert", needing);
  }

  // Contract §22: a critical revision (reviewed at the critical review
  // threshold, its recurrences alerted at once) is marked in every list.
  function markCritical(tr, td, row) {
    if (row.severity !== "critical") return;
    tr.classList.add("critical");
    tr.dataset.severity = "critical";
    const mark = document.createElement("span");
    mark.className = "severity critical";
    mark.textContent = "critical";
    td.append(" ", mark);
  }

  function renderRevisions(list) {
    const body = $("#revisions tbody");
    body.replaceChildren();
    // The table lists the first LIMIT revisions (streak 0 included: their yield
    // matters too); the chart only those with a streak.
    const streaks = list.revisions.filter((row) => row.terminal_recurred_streak > 0);
    // No streak at all: a short message instead of an empty chart frame.
    $("#no-revisions").hidden = streaks.length > 0;
    $(".chart-box").hidden = streaks.length === 0;
    $("#revisions-shown").textContent = `${list.revisions.length} of ${list.total ?? list.revisions.length} revisions`;
    if (list.revisions.length === 0) emptyRow(body, "none: no revision of this scope has a selection or a verdict");
    for (const row of list.revisions) {
      const tr = document.createElement("tr");
      tr.dataset.revision = revisionLabel(row.artifact_ref);
      if (row.needs_review) tr.classList.add("needs-review");
      cell(tr, String(row.rank), "num");
      const revisionCell = cell(tr, revisionLabel(row.artifact_ref));
      if (window.rlTimeline) window.rlTimeline.link(revisionCell, selected, row.artifact_ref); // opens its timeline
      markCritical(tr, revisionCell, row);
      cell(tr, row.signature_key);
      cell(tr, String(row.terminal_recurred_streak), "num").dataset.field = "streak";
      cell(tr, row.needs_review ? "needs review" : "", "flag");
      cell(tr, surfaceLabel(row), row.needs_review ? "flag" : null).dataset.field = "repair_surface";
      cell(tr, String(row.recurred ?? 0), "num").dataset.field = "recurred";
      cell(tr, String(row.avoided ?? 0), "num").dataset.field = "avoided";
      cell(tr, yieldLabel(row), row.low_yield ? "num low-yield" : "num").dataset.field = "yield";
      body.appendChild(tr);
    }
    const labels = streaks.map((row) => `${revisionLabel(row.artifact_ref)} · ${row.signature_key}`);
    const data = streaks.map((row) => row.terminal_recurred_streak);
    const colors = streaks.map((row) => (row.needs_review ? COLORS.review : COLORS.fact));
    $(".chart-box").style.height = `${Math.max(120, 40 + 34 * streaks.length)}px`;
    if (chart === null) {
      chart = new Chart($("#streak-chart"), {
        type: "bar",
        data: { labels, datasets: [{ label: "terminal_recurred_streak", data, backgroundColor: colors, barPercentage: 0.7 }] },
        options: {
          indexAxis: "y",
          animation: false,
          maintainAspectRatio: false,
          plugins: { legend: { display: false } },
          scales: {
            x: { beginAtZero: true, ticks: { precision: 0 }, title: { display: true, text: "streak" } },
            y: { ticks: { autoSkip: false } },
          },
        },
      });
    } else {
      chart.data.labels = labels;
      chart.data.datasets[0].data = data;
      chart.data.datasets[0].backgroundColor = colors;
      chart.update("none");
    }
  }

  function renderReview(list) {
    // "needing review" split by the revisions' review candidates: red only while one waits for a
    // decision or has no candidate (a decided one stays needing review until its streak ends).
    const split = list.split;
    $("#review-split").hidden = !split;
    if (split) {
      for (const node of document.querySelectorAll("#review-split [data-split]")) node.textContent = String(split[node.dataset.split]);
      const attention = split.waiting + split.no_candidate > 0;
      $('#detail [data-counter="needing_review"]').classList.toggle("alert", attention);
      $(".review-panel").classList.toggle("alert", attention);
      $('#review-split [data-split="waiting"]').classList.toggle("alert", split.waiting > 0);
    }
    window.dashboardReviewSplit = split || null;
    // The threshold the workers stored in the view (null: a view written before they stored it).
    const threshold = list.review_threshold ?? "?";
    $("#review-threshold").textContent = String(threshold);
    $("#review-incomplete").hidden = list.complete;
    const body = $("#review tbody");
    body.replaceChildren();
    if (list.revisions.length === 0) emptyRow(body, `none: no revision's streak reaches ${threshold}`);
    for (const row of list.revisions) {
      const tr = document.createElement("tr");
      tr.className = "needs-review";
      tr.dataset.revision = revisionLabel(row.artifact_ref);
      markCritical(tr, cell(tr, revisionLabel(row.artifact_ref)), row);
      cell(tr, row.signature_key);
      cell(tr, String(row.terminal_recurred_streak), "num");
      cell(tr, surfaceLabel(row), "flag");
      cell(tr, yieldLabel(row), row.low_yield ? "num low-yield" : "num");
      body.appendChild(tr);
    }
  }

  function select(scopeId) {
    selected = scopeId;
    history.replaceState(null, "", `#scope=${encodeURIComponent(scopeId)}`);
    for (const row of document.querySelectorAll("#scopes tbody tr")) {
      row.classList.toggle("selected", row.dataset.scope === scopeId);
    }
    refresh();
  }

  // The API wants a token: hide the view until login.js has one
  // (refused: the API did not accept the token this tab sent).
  function askForToken(refused) {
    getJSON.forget();
    $("#scopes-section").hidden = true;
    $("#detail").hidden = true;
    $("#forget-token").hidden = true;
    window.rlLogin.ask(refused, () => {
      $("#scopes-section").hidden = false;
      refresh();
    });
  }

  $("#forget-token").addEventListener("click", () => askForToken(false));

  let running = false;
  let again = false; // a refresh asked for while one runs (a click) runs right after it
  async function refresh() {
    if (window.rlLogin.awaiting()) return;
    if (running) {
      again = true;
      return;
    }
    running = true;
    again = false;
    try {
      const scopes = await getJSON(window.rlScopes ? window.rlScopes.url() : "/scopes");
      if (scopes.changed) renderScopes(scopes.body);
      const ids = scopes.body.scopes.map((s) => s.scope_id);
      // A selected scope stays selected when paging or filters leave it off the list (it leaves when it leaves the view).
      if (!selected || (!window.rlScopes && !ids.includes(selected))) {
        selected = ids[0] || "";
        if (selected) renderScopes(scopes.body);
      }
      $("#detail").hidden = !selected;
      if (selected) {
        const base = `/scopes/${encodeURIComponent(selected)}`;
        const [record, revisions, review, trend, byUnknown, suspects, effects] = await Promise.all([
          getJSON(`${base}/statistics`),
          getJSON(`${base}/revisions?sort=streak&limit=${LIMIT}`),
          getJSON(`${base}/review-candidates`),
          window.rlTrend ? getJSON(`${base}/trend`) : { body: null, changed: false },
          getJSON(`${base}/revisions?sort=unknown&limit=${LIMIT}`),
          getJSON(`${base}/revisions?binding_suspect=true&sort=unknown&limit=100`),
          getJSON(`${base}/revisions?sort=probability_helps&limit=100`), // contract §21.4: the lessons' effect (dashboard-effect.js)
        ]);
        if (record.body && revisions.body && review.body && byUnknown.body && suspects.body && effects.body) {
          const changed = record.changed || revisions.changed || review.changed || byUnknown.changed || suspects.changed || effects.changed
            || $("#scope-name").textContent !== selected;
          if (changed) {
            await loadCatalogue();
            renderStatistics(record.body);
            renderRevisions(revisions.body);
            renderReview(review.body);
            window.rlUnknown.render(record.body, byUnknown.body, suspects.body, review.body.review_threshold);
            window.rlEffect.render(record.body, effects.body);
            stats.renders += 1;
          }
          if (window.rlTrend && (trend.changed || changed)) window.rlTrend.render(trend.body);
        } else if (!record.body && ids.length && !ids.includes(selected)) {
          selected = ""; // the scope left the view
          again = true;
        }
      }
      document.body.dataset.ready = "true";
      $("#forget-token").hidden = !storedToken();
      setStatus(`live · refreshed ${new Date().toLocaleTimeString()} · every ${REFRESH_MS / 1000} s`, false);
    } catch (error) {
      if (error instanceof Unauthorized) {
        stats.unauthorized += 1;
        askForToken(error.tokenRefused);
        return;
      }
      stats.errors += 1;
      stats.lastError = String(error);
      setStatus(`cannot read the view: ${error.message} (retrying)`, true);
    } finally {
      running = false;
      if (again) refresh();
    }
  }

  window.dashboardRefresh = refresh; // the scope list's controls (dashboard-history.js) ask for a refresh
  refresh();
  setInterval(refresh, REFRESH_MS);
})();
