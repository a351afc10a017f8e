// recurrence-ledger dashboard: the effect of each lesson (contract §21.4),
// from the scope's record (its effects by verdict and the workers'
// effect_min_resolved) and GET /scopes/{scope}/revisions?sort=probability_helps
// (each row's published effect: both arms, probability_helps, verdict).
// Nothing is decided here: the verdict, the rates and the probability are the
// ledger's; the page adds two things for display only — each arm's 90 %
// credible interval (quantiles 0.05 and 0.95 of its posterior
// Beta(1 + recurred, 1 + resolved − recurred), as floats) and how many more
// resolved observations each arm needs before a verdict can be reached
// (effect_min_resolved minus the arm's resolved, at least 0). Labels come from
// GET /field-catalogue (the Effect record's titles and descriptions).
"use strict";

(() => {
  const { cell, emptyRow, revisionLabel } = window.rlCommon;
  const $ = (selector) => document.querySelector(selector);
  const VERDICTS = ["helps", "harms", "undecided", "insufficient"];

  // ln Γ(x), Lanczos (g = 7, n = 9): accurate to ~1e-15 for x > 0.
  const LANCZOS = [0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059,
    12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7];
  function lnGamma(x) {
    if (x < 0.5) return Math.log(Math.PI / Math.sin(Math.PI * x)) - lnGamma(1 - x);
    x -= 1;
    let sum = LANCZOS[0];
    for (let i = 1; i < 9; i += 1) sum += LANCZOS[i] / (x + i);
    const t = x + 7.5;
    return 0.5 * Math.log(2 * Math.PI) + (x + 0.5) * Math.log(t) - t + Math.log(sum);
  }

  // The continued fraction of the regularized incomplete beta function (modified Lentz).
  function betaFraction(a, b, x) {
    const tiny = 1e-300;
    let c = 1;
    let d = 1 - ((a + b) * x) / (a + 1);
    d = 1 / (Math.abs(d) < tiny ? tiny : d);
    let h = d;
    for (let m = 1; m <= 1000; m += 1) {
      const m2 = 2 * m;
      let aa = (m * (b - m) * x) / ((a + m2 - 1) * (a + m2));
      d = 1 / (Math.abs(1 + aa * d) < tiny ? tiny : 1 + aa * d);
      c = Math.abs(1 + aa / c) < tiny ? tiny : 1 + aa / c;
      h *= d * c;
      aa = (-(a + m) * (a + b + m) * x) / ((a + m2) * (a + m2 + 1));
      d = 1 / (Math.abs(1 + aa * d) < tiny ? tiny : 1 + aa * d);
      c = Math.abs(1 + aa / c) < tiny ? tiny : 1 + aa / c;
      const step = d * c;
      h *= step;
      if (Math.abs(step - 1) < 1e-15) break;
    }
    return h;
  }

  // I_x(a, b), the Beta(a, b) distribution function at x.
  function betaCdf(a, b, x) {
    if (x <= 0) return 0;
    if (x >= 1) return 1;
    const front = Math.exp(lnGamma(a + b) - lnGamma(a) - lnGamma(b) + a * Math.log(x) + b * Math.log(1 - x));
    return x < (a + 1) / (a + b + 2) ? (front * betaFraction(a, b, x)) / a : 1 - (front * betaFraction(b, a, 1 - x)) / b;
  }

  // The q-quantile of Beta(a, b) by bisection (the distribution function is monotone): 60 halvings, < 1e-15.
  function betaQuantile(a, b, q) {
    let low = 0;
    let high = 1;
    for (let i = 0; i < 60; i += 1) {
      const middle = (low + high) / 2;
      if (betaCdf(a, b, middle) < q) low = middle;
      else high = middle;
    }
    return (low + high) / 2;
  }

  // The 90 % credible interval of an arm's recurrence rate under a uniform prior: [q0.05, q0.95] of Beta(1 + f, 1 + n − f).
  function credibleInterval(recurred, resolved) {
    const a = 1 + recurred;
    const b = 1 + resolved - recurred;
    return [betaQuantile(a, b, 0.05), betaQuantile(a, b, 0.95)];
  }

  let labels = {};
  // The Effect record's field titles and descriptions (GET /field-catalogue: "effect").
  function load(catalogue) {
    labels = catalogue || {};
    for (const th of document.querySelectorAll("#effects th[data-effect-label]")) {
      const label = labels[th.dataset.effectLabel];
      if (!label) continue;
      th.textContent = label.title;
      th.title = label.description || "";
    }
  }

  const fixed = (value, places) => (value === null || value === undefined ? "–" : value.toFixed(places));

  // "1/5 = 0.20 [0.04–0.58]": recurred of resolved, the published rate, the display interval.
  function armLabel(arm, rate) {
    if (!arm.resolved) return `0 resolved`;
    const [low, high] = credibleInterval(arm.recurred, arm.resolved);
    return `${arm.recurred}/${arm.resolved} = ${fixed(rate, 2)} [${low.toFixed(2)}–${high.toFixed(2)}]`;
  }

  // More resolved observations each arm needs before a verdict can be reached ("" once both have enough).
  function stillNeeded(effect, minimum) {
    if (!minimum) return "";
    const treated = Math.max(0, minimum - effect.treated.resolved);
    const withheld = Math.max(0, minimum - effect.withheld.resolved);
    if (treated === 0 && withheld === 0) return "";
    return `treated ${treated} · withheld ${withheld}`;
  }

  function lessonList(node, rows) {
    node.replaceChildren();
    node.textContent = rows.length ? rows.map((row) => revisionLabel(row.artifact_ref)).join(", ") : "none";
  }

  function render(record, list) {
    const counts = record.effects || {};
    for (const verdict of VERDICTS) {
      const node = $(`#effect-counts [data-verdict="${verdict}"]`);
      if (node) node.textContent = String(counts[verdict] ?? 0);
    }
    // effect_min_resolved is shown only when the record carries the workers' value (a record that does not
    // leaves the column out rather than guess a policy of its own).
    const minimum = record.effect_min_resolved || 0;
    $("#effect-min-resolved").textContent = minimum ? String(minimum) : "";
    $("#effect-still-needed-note").hidden = !minimum;
    for (const node of document.querySelectorAll("#effects .still-needed")) node.hidden = !minimum;
    const rows = list.revisions.filter((row) => row.effect);
    lessonList($("#effect-harms"), rows.filter((row) => row.effect.verdict === "harms"));
    lessonList($("#effect-helps"), rows.filter((row) => row.effect.verdict === "helps"));
    $(".effect-panel").classList.toggle("alert", (counts.harms ?? 0) > 0);
    const body = $("#effects tbody");
    body.replaceChildren();
    if (rows.length === 0) emptyRow(body, "none: no lesson of this scope was withheld from a task");
    for (const row of rows) {
      const effect = row.effect;
      const tr = document.createElement("tr");
      tr.dataset.revision = revisionLabel(row.artifact_ref);
      tr.dataset.verdict = effect.verdict;
      tr.classList.add(`effect-${effect.verdict}`);
      cell(tr, revisionLabel(row.artifact_ref));
      cell(tr, row.signature_key);
      cell(tr, armLabel(effect.treated, effect.recurrence_rate_treated), "num").dataset.field = "treated";
      cell(tr, armLabel(effect.withheld, effect.recurrence_rate_withheld), "num").dataset.field = "withheld";
      cell(tr, fixed(effect.probability_helps, 4), "num").dataset.field = "probability_helps";
      cell(tr, effect.verdict, "verdict").dataset.field = "verdict";
      const needed = cell(tr, stillNeeded(effect, minimum), "num still-needed");
      needed.dataset.field = "still_needed";
      needed.hidden = !minimum;
      cell(tr, effect.assignment_mismatches ? String(effect.assignment_mismatches) : "", "num").dataset.field = "assignment_mismatches";
      body.appendChild(tr);
    }
  }

  window.rlEffect = { load, render, credibleInterval };
})();
