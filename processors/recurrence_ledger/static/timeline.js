// One revision's timeline: its verdicts along journal position as a Chart.js
// scatter chart. Kinds are told apart by point shape and by their label, not
// by colour alone: recurred ▲ (triangle), avoided ◆ (rotated square), unknown
// selection ✕ (cross). y is the run's recurred count so far, so each run is a
// rising staircase that an avoided verdict resets to 0; the review threshold is
// a dashed line, each run is named above the chart, each point carries its task
// outcome's id. Clicking a point (or a row) shows the explain command to copy.
//
// window.timelineView (read by the browser test): the points drawn per kind,
// the runs, the threshold and the selected point's command.
"use strict";

(() => {
  const { getJSON, cell, emptyRow, revisionLabel, runLabel, poll, params, refreshMs, stats } = window.rlCommon;
  const scope = params.get("scope") || "";
  const artifactId = params.get("artifact_id") || "";
  const revision = params.get("revision") || "";
  const KINDS = {
    recurred: { label: "recurred ▲", pointStyle: "triangle", color: "#b3261e", radius: 8 },
    avoided: { label: "avoided ◆", pointStyle: "rectRot", color: "#1b7f3b", radius: 8 },
    unknown: { label: "unknown selection ✕", pointStyle: "crossRot", color: "#5b6575", radius: 8 },
  };
  const $ = (selector) => document.querySelector(selector);
  const view = (window.timelineView = { points: {}, runs: [], threshold: null, selected: null });
  let chart = null;

  // The points of the chart, oldest first: [{kind, x, y, row}].
  function points(verdicts) {
    const result = [];
    let count = 0;
    let run;
    for (const row of verdicts) {
      if (row.run_start_position !== run) { count = 0; run = row.run_start_position; }
      if (row.event === "avoided") {
        count = 0;
        result.push({ kind: "avoided", x: row.task_outcome_position, y: 0, row });
      } else if (row.event === "recurred") {
        count += 1;
        result.push({ kind: "recurred", x: row.task_outcome_position, y: count, row });
      } else if (row.verdict === null) {
        result.push({ kind: "unknown", x: row.task_outcome_position, y: count, row });
      }
    }
    return result;
  }

  // Task outcome ids next to the points, and the run names above the chart.
  const labels = {
    id: "rlLabels",
    afterDatasetsDraw(chartInstance) {
      const { ctx, chartArea } = chartInstance;
      ctx.save();
      ctx.font = "11px 'Liberation Sans', Arial, sans-serif";
      ctx.fillStyle = "#1d2430";
      ctx.textAlign = "center";
      const many = chartInstance.data.datasets.reduce((n, d) => n + (d.rlKind ? d.data.length : 0), 0) > 60;
      chartInstance.data.datasets.forEach((dataset, index) => {
        if (!dataset.rlKind || many) return;
        chartInstance.getDatasetMeta(index).data.forEach((element, j) => {
          ctx.fillText(dataset.data[j].row.task_outcome_id, element.x, element.y - 12);
        });
      });
      ctx.fillStyle = "#5b6575";
      ctx.textAlign = "left";
      for (const run of chartInstance.rlRuns || []) {
        const x = chartInstance.scales.x.getPixelForValue(run.run_start_position ?? run.first_position);
        ctx.fillText(`run ${runLabel(run.run_start_position)}${run.reaches_threshold ? " · reaches threshold" : ""}`, Math.max(chartArea.left, x) + 3, chartArea.top + 12);
        ctx.strokeStyle = "#d9dee6";
        ctx.beginPath();
        ctx.moveTo(Math.max(chartArea.left, x), chartArea.top);
        ctx.lineTo(Math.max(chartArea.left, x), chartArea.bottom);
        ctx.stroke();
      }
      ctx.restore();
    },
  };

  function showPoint(row) {
    view.selected = { task_outcome_id: row.task_outcome_id, explain: row.explain };
    $("#point").hidden = false;
    const failure = row.failure_ref ? ` · failure ${row.failure_ref.item_kind}[${row.failure_ref.item_index}]` : "";
    const what = row.event === "selected" ? "unknown selection (no verdict)" : row.event;
    $("#point-text").textContent = `${row.task_outcome_id}: ${what} at position ${row.task_outcome_position}, run ${runLabel(row.run_start_position)}${failure}`;
    $("#explain-command").value = row.explain;
    for (const tr of document.querySelectorAll("#verdicts tbody tr")) tr.classList.toggle("selected", tr.dataset.outcome === row.task_outcome_id && tr.dataset.event === row.event);
  }

  function renderChart(history, drawn) {
    const threshold = history.review_threshold;
    const xs = drawn.map((p) => p.x);
    const minX = Math.min(...xs, 0);
    const maxX = Math.max(...xs, 1);
    const datasets = Object.entries(KINDS).map(([kind, style]) => ({
      label: style.label,
      rlKind: kind,
      data: drawn.filter((p) => p.kind === kind).map((p) => ({ x: p.x, y: p.y, row: p.row })),
      pointStyle: style.pointStyle,
      pointRadius: style.radius,
      pointHoverRadius: style.radius + 3,
      borderWidth: 2,
      borderColor: style.color,
      backgroundColor: style.color + "55",
      showLine: false,
    }));
    // One line per run (its staircase), under the points.
    const byRun = new Map();
    for (const p of drawn) {
      if (p.kind === "unknown") continue;
      const key = p.row.run_start_position;
      if (!byRun.has(key)) byRun.set(key, []);
      byRun.get(key).push({ x: p.x, y: p.y });
    }
    for (const [start, data] of byRun) {
      datasets.push({ label: `run ${runLabel(start)}`, data, showLine: true, pointRadius: 0, pointHitRadius: 0, borderColor: "#8fa3bf", borderWidth: 1.5, stepped: "before", order: 2 });
    }
    if (threshold !== null && threshold !== undefined) {
      datasets.push({
        label: `review threshold ${threshold}`, rlThreshold: true, data: [{ x: minX - 0.5, y: threshold }, { x: maxX + 0.5, y: threshold }],
        showLine: true, pointRadius: 0, pointHitRadius: 0, pointStyle: "line", borderColor: "#b3261e", borderDash: [6, 4], borderWidth: 1.5, order: 3,
      });
    }
    const yMax = Math.max(threshold || 0, ...drawn.map((p) => p.y)) + 1;
    const options = {
      animation: false,
      maintainAspectRatio: false,
      parsing: false,
      scales: {
        x: { type: "linear", min: minX - 0.5, max: maxX + 0.5, title: { display: true, text: "journal position (task_outcome_position)" }, ticks: { precision: 0 } },
        y: { min: -0.4, max: yMax, afterBuildTicks: (axis) => { axis.ticks = axis.ticks.filter((tick) => tick.value >= 0); }, title: { display: true, text: "recurred so far in the run" }, ticks: { precision: 0, stepSize: 1 } },
      },
      plugins: {
        legend: { labels: { usePointStyle: true, filter: (item, data) => !data.datasets[item.datasetIndex].label.startsWith("run ") } },
        tooltip: {
          filter: (item) => Boolean(item.dataset.rlKind),
          callbacks: {
            label: (context) => {
              const row = context.raw.row;
              if (!row) return context.dataset.label;
              const what = row.event === "selected" ? "unknown selection" : row.event;
              return `${what} · ${row.task_outcome_id} · position ${row.task_outcome_position} · run ${runLabel(row.run_start_position)}`;
            },
          },
        },
      },
      onClick: (_event, elements) => {
        const hit = elements.find((element) => chart.data.datasets[element.datasetIndex].rlKind);
        if (hit) showPoint(chart.data.datasets[hit.datasetIndex].data[hit.index].row);
      },
    };
    if (chart) chart.destroy();
    chart = new Chart($("#timeline-chart"), { type: "scatter", data: { datasets }, options, plugins: [labels] });
    chart.rlRuns = history.runs;
    chart.update("none");
  }

  function render(history) {
    const ref = history.artifact_ref;
    $("#revision-name").textContent = revisionLabel(ref);
    document.title = `recurrence-ledger · ${revisionLabel(ref)} in ${history.scope_id}`;
    $("#signature").textContent = history.signature_key ?? "";
    $("#scope-link").textContent = history.scope_id;
    $("#scope-link").href = `/#scope=${encodeURIComponent(history.scope_id)}`;
    $("#back").href = `/#scope=${encodeURIComponent(history.scope_id)}`;
    $("#streak").textContent = String(history.terminal_recurred_streak ?? "–");
    $("#threshold").textContent = String(history.review_threshold ?? "?");
    $("#streak").classList.toggle("alert", Boolean(history.needs_review));
    $("#kept").textContent = `${history.retained} / ${history.total}`;
    $("#surface").textContent = history.repair_surface ?? "–";
    $("#truncated").hidden = !history.truncated;

    const oldest = [...history.verdicts].reverse();
    const drawn = points(oldest);
    view.points = Object.fromEntries(Object.keys(KINDS).map((kind) => [kind, drawn.filter((p) => p.kind === kind).map((p) => ({ x: p.x, y: p.y, outcome: p.row.task_outcome_id }))]));
    view.runs = history.runs.map((run) => ({ start: run.run_start_position, recurred: run.recurred, reaches: run.reaches_threshold, current: run.current, candidate: run.review_candidate }));
    view.threshold = history.review_threshold;
    renderChart(history, drawn);

    const runs = $("#runs tbody");
    runs.replaceChildren();
    if (history.runs.length === 0) emptyRow(runs, "none: no verdict yet");
    for (const run of history.runs) {
      const tr = document.createElement("tr");
      if (run.reaches_threshold) tr.classList.add("needs-review");
      cell(tr, runLabel(run.run_start_position) + (run.complete ? "" : " (incomplete)"));
      cell(tr, String(run.recurred), "num");
      cell(tr, `${run.first_position}–${run.last_position}`);
      cell(tr, run.reaches_threshold ? "yes" : "no", run.reaches_threshold ? "flag" : null);
      cell(tr, run.current ? "current" : "");
      cell(tr, run.review_candidate ? run.review_candidate.slice(7, 19) + "…" : "–");
      runs.appendChild(tr);
    }

    const body = $("#verdicts tbody");
    body.replaceChildren();
    if (history.verdicts.length === 0) emptyRow(body, "none: the follower has recorded no observation of this revision");
    const symbols = { recurred: "▲ recurred", avoided: "◆ avoided" };
    for (const row of history.verdicts) {
      const tr = document.createElement("tr");
      tr.dataset.outcome = row.task_outcome_id;
      tr.dataset.event = row.event;
      cell(tr, String(row.task_outcome_position), "num");
      cell(tr, symbols[row.event] || (row.verdict === null ? "✕ selected, unknown" : `selected (${row.verdict})`));
      cell(tr, row.task_outcome_id);
      cell(tr, row.failure_ref ? `${row.failure_ref.item_kind}[${row.failure_ref.item_index}]` : "–");
      cell(tr, runLabel(row.run_start_position));
      tr.addEventListener("click", () => showPoint(row));
      body.appendChild(tr);
    }
    stats.renders += 1;
  }

  $("#copy").addEventListener("click", async () => {
    const input = $("#explain-command");
    try {
      await navigator.clipboard.writeText(input.value);
    } catch (_) {
      input.select();
      document.execCommand("copy");
    }
    $("#copy").textContent = "Copied";
    setTimeout(() => { $("#copy").textContent = "Copy"; }, 1500);
  });

  const url = `/scopes/${encodeURIComponent(scope)}/revisions/${encodeURIComponent(artifactId)}/${encodeURIComponent(revision)}/history?order=newest&limit=1000`;
  poll(async () => {
    if (!scope || !artifactId || !revision) {
      $("#missing").hidden = false;
      $("#missing").textContent = "Open a revision from the dashboard: this page needs scope, artifact_id and revision.";
      return;
    }
    const history = await getJSON(url);
    if (history.body === null) {
      $("#timeline").hidden = true;
      $("#missing").hidden = false;
      $("#missing").textContent = `The view holds no revision ${artifactId} r${revision} in scope ${scope}.`;
      return;
    }
    $("#missing").hidden = true;
    $("#timeline").hidden = false;
    if (history.changed) render(history.body);
  }, refreshMs);
})();
