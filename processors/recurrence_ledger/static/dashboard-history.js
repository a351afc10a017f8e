// The dashboard's history parts (loaded before dashboard.js, which calls them):
// - window.rlScopes: the scope list's query (GET /scopes?sort=&filter=&needs_review=&limit=&offset=)
//   from the controls above the table, and its pager — thousands of scopes are paged, never all listed;
// - window.rlTrend: the scope's trend chart (GET /scopes/{scope}/trend), its counters along as_of_position;
// - window.rlTimeline: a revision cell as a link to its timeline page.
"use strict";

(() => {
  const PAGE = 50;
  const $ = (selector) => document.querySelector(selector);
  let offset = 0;
  let timer = null;

  const rlScopes = {
    url() {
      const query = new URLSearchParams({ limit: String(PAGE), offset: String(offset), sort: $("#scope-sort").value });
      const text = $("#scope-filter").value.trim();
      if (text) query.set("filter", text);
      if ($("#scope-review").checked) query.set("needs_review", "true");
      return `/scopes?${query}`;
    },
    // After a list is rendered: the pager's text and buttons.
    pager(list) {
      const available = list.available ?? list.total;
      const shown = list.scopes.length;
      $("#scope-page").textContent = shown ? `${list.offset + 1}–${list.offset + shown} of ${available}` + (available !== list.total ? ` (${list.total} scopes)` : "") : "";
      $("#scope-prev").disabled = list.offset === 0;
      $("#scope-next").disabled = list.offset + shown >= available;
      $("#more-scopes").hidden = true;
    },
  };

  function changed(resetOffset) {
    if (resetOffset) offset = 0;
    if (window.dashboardRefresh) window.dashboardRefresh();
  }

  document.addEventListener("DOMContentLoaded", () => {
    // The filter form never submits (no inline handler: the page's CSP allows only its own scripts).
    document.querySelectorAll("form.controls").forEach((form) => form.addEventListener("submit", (event) => event.preventDefault()));
    $("#scope-filter").addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(() => changed(true), 250); });
    $("#scope-sort").addEventListener("change", () => changed(true));
    $("#scope-review").addEventListener("change", () => changed(true));
    $("#scope-prev").addEventListener("click", () => { offset = Math.max(0, offset - PAGE); changed(false); });
    $("#scope-next").addEventListener("click", () => { offset += PAGE; changed(false); });
  });

  // The trend: one line per counter along as_of_position (points = ScopeStatistics records).
  const SERIES = [
    ["recurred", "#b3261e", [], "triangle"],
    ["avoided", "#1b7f3b", [], "rectRot"],
    ["selected", "#2f5d9b", [], "circle"],
    ["unknown", "#8a6d1f", [6, 3], "crossRot"],
    ["needing_review", "#7a1f5c", [2, 2], "star"],
    ["pending_outcomes", "#5b6575", [8, 3, 2, 3], "rect"],
  ];
  let chart = null;
  const rlTrend = {
    render(trend) {
      const points = trend ? trend.points : [];
      $("#trend-note").textContent = trend
        ? `${points.length} of ${trend.total} points (one per statistics record the workers committed)` + (trend.retained < trend.total ? "; older points were dropped" : "")
        : "";
      $("#no-trend").hidden = points.length > 0;
      $(".trend-box").hidden = points.length === 0;
      const datasets = SERIES.map(([name, color, dash, style]) => ({
        label: name, data: points.map((p) => ({ x: p.as_of_position, y: p[name] })), borderColor: color, backgroundColor: color,
        borderDash: dash, pointStyle: style, pointRadius: points.length > 80 ? 0 : 3, borderWidth: 1.5, stepped: "before",
      }));
      if (chart === null) {
        chart = new Chart($("#trend-chart"), {
          type: "line",
          data: { datasets },
          options: {
            animation: false, maintainAspectRatio: false, parsing: false,
            scales: {
              x: { type: "linear", title: { display: true, text: "as_of_position" }, ticks: { precision: 0 } },
              y: { beginAtZero: true, ticks: { precision: 0 }, title: { display: true, text: "count" } },
            },
            plugins: { legend: { labels: { usePointStyle: true } } },
          },
        });
      } else {
        chart.data.datasets = datasets;
        chart.update("none");
      }
    },
  };

  const rlTimeline = {
    // Turn a revision's table cell into a link to its timeline (its text unchanged).
    link(td, scope, ref) {
      const a = document.createElement("a");
      a.href = `/timeline?scope=${encodeURIComponent(scope)}&artifact_id=${encodeURIComponent(ref.artifact_id)}&revision=${ref.revision}`;
      a.textContent = td.textContent;
      a.dataset.artifactId = ref.artifact_id;
      a.dataset.revision = String(ref.revision);
      a.addEventListener("click", (event) => event.stopPropagation());
      td.textContent = "";
      td.appendChild(a);
    },
  };

  Object.assign(window, { rlScopes, rlTrend, rlTimeline });
})();
