// Drives the history pages in headless Debian Chromium with playwright-core
// (the system's chromium, no browser download) for
// tests/e2e/test_timeline_browser.py.
//
// Usage: node timeline.mjs BASE_URL SCOPE ARTIFACT_ID OUTCOME SHOTS_DIR
//
// 0. with RL_BROWSER_API_TOKEN in the environment (the API token, as
//    production runs): opens the timeline of SCOPE's ARTIFACT_ID r1 first,
//    a navigation without the token: waits for its token form, records the
//    page's answer status, headers and what it showed while asking
//    ("asked"), enters the token and waits for the timeline; the token then
//    serves the other pages of the tab;
// 1. opens BASE_URL/ (the dashboard), clicks SCOPE's row in the scope list,
//    waits for its trend chart, screenshots SHOTS_DIR/dashboard-trend.png;
// 2. clicks the revision ARTIFACT_ID in the revisions table, waits for the
//    timeline page, reads what its chart drew (points per kind with their
//    point style, runs, threshold) and its tables, clicks the chart point of
//    task outcome OUTCOME and reads the explain command offered, screenshots
//    SHOTS_DIR/timeline.png;
// 3. opens BASE_URL/review (the inbox), reads its waiting rows, screenshots SHOTS_DIR/review-waiting.png;
// 4. types a filter into the dashboard's scope list and reads the rows.
// Prints one JSON object on stdout; errors go to stderr and exit code 1.
import { join } from "node:path";
import { withChromium } from "./chromium.mjs";

const [base, scope, artifactId, outcome, shots] = process.argv.slice(2);
if (!shots) {
  console.error("usage: node timeline.mjs BASE_URL SCOPE ARTIFACT_ID OUTCOME SHOTS_DIR");
  process.exit(2);
}

const result = { consoleErrors: [] };
await withChromium({ width: 1100, height: 900 }, async (page) => {
  page.on("console", (message) => { if (message.type() === "error") result.consoleErrors.push(message.text()); });
  page.on("pageerror", (error) => result.consoleErrors.push(String(error)));

  // 0. The timeline opened first, behind the API token.
  const apiToken = process.env.RL_BROWSER_API_TOKEN || "";
  if (apiToken) {
    const url = `${base}/timeline?scope=${encodeURIComponent(scope)}&artifact_id=${encodeURIComponent(artifactId)}&revision=1&refresh=500`;
    const response = await page.goto(url, { waitUntil: "load", timeout: 20000 });
    const headers = response.headers();
    await page.waitForSelector("body[data-auth='required'] #login:not([hidden])", { timeout: 20000 });
    result.asked = {
      status: response.status(), csp: headers["content-security-policy"] || null, nosniff: headers["x-content-type-options"] || null,
      shown: await page.evaluate(() => document.querySelector("#status").textContent),
    };
    await page.fill("#token-input", apiToken);
    await page.press("#token-input", "Enter");
    await page.waitForFunction(() => document.body.dataset.ready === "true" && window.timelineView && window.timelineView.points.recurred, null, { timeout: 15000 });
  }

  // 1. The dashboard: click the scope, wait for its trend.
  await page.goto(`${base}/?refresh=500`, { waitUntil: "load", timeout: 20000 });
  await page.waitForSelector("body[data-ready='true'] #detail:not([hidden])", { timeout: 15000 });
  const row = `#scopes tbody tr[data-scope="${scope}"]`;
  await page.waitForSelector(row, { timeout: 10000 });
  await page.click(row);
  await page.waitForFunction((wanted) => document.querySelector("#scope-name").textContent === wanted, scope, { timeout: 10000 });
  await page.waitForFunction(() => {
    const chart = Chart.getChart(document.querySelector("#trend-chart"));
    return chart && chart.data.datasets[0].data.length > 0;
  }, null, { timeout: 10000 });
  result.trend = await page.evaluate(() => {
    const chart = Chart.getChart(document.querySelector("#trend-chart"));
    return Object.fromEntries(chart.data.datasets.map((d) => [d.label, d.data.map((p) => [p.x, p.y])]));
  });
  result.scopePage = await page.evaluate(() => document.querySelector("#scope-page").textContent);
  await page.screenshot({ path: join(shots, "dashboard-trend.png") });

  // 2. Click the revision: its timeline.
  const link = `#revisions a[data-artifact-id="${artifactId}"]`;
  await page.waitForSelector(link, { timeout: 10000 });
  await page.click(link);
  await page.waitForURL(/\/timeline\?/, { timeout: 10000 });
  await page.waitForFunction(() => document.body.dataset.ready === "true" && window.timelineView && window.timelineView.points.recurred, null, { timeout: 15000 });
  result.timelineUrl = page.url();
  result.timeline = await page.evaluate(() => {
    const chart = Chart.getChart(document.querySelector("#timeline-chart"));
    const text = (node) => node.textContent.trim();
    return {
      view: window.timelineView,
      styles: Object.fromEntries(chart.data.datasets.filter((d) => d.rlKind).map((d) => [d.rlKind, [d.label, d.pointStyle]])),
      threshold: chart.data.datasets.filter((d) => d.rlThreshold).map((d) => [d.label, d.data.map((p) => p.y)]),
      legend: chart.legend.legendItems.map((item) => item.text),
      runs: [...document.querySelectorAll("#runs tbody tr")].map((tr) => [...tr.querySelectorAll("td")].map(text)),
      verdicts: [...document.querySelectorAll("#verdicts tbody tr")].map((tr) => [...tr.querySelectorAll("td")].map(text)),
      title: text(document.querySelector("#revision-name")),
      threshold_shown: text(document.querySelector("#threshold")),
    };
  });
  // Click the point of OUTCOME on the canvas.
  const spot = await page.evaluate((wanted) => {
    const canvas = document.querySelector("#timeline-chart");
    const chart = Chart.getChart(canvas);
    const box = canvas.getBoundingClientRect();
    for (const [index, dataset] of chart.data.datasets.entries()) {
      if (!dataset.rlKind) continue;
      const at = dataset.data.findIndex((p) => p.row.task_outcome_id === wanted);
      if (at >= 0) {
        const element = chart.getDatasetMeta(index).data[at];
        return { x: box.left + element.x, y: box.top + element.y };
      }
    }
    return null;
  }, outcome);
  if (!spot) throw new Error(`no point for ${outcome}`);
  await page.mouse.click(spot.x, spot.y);
  await page.waitForFunction(() => document.querySelector("#explain-command").value !== "", null, { timeout: 5000 });
  result.explain = await page.evaluate(() => ({ command: document.querySelector("#explain-command").value, text: document.querySelector("#point-text").textContent }));
  await page.screenshot({ path: join(shots, "timeline.png") });

  // 3. The review queue.
  await page.goto(`${base}/review?refresh=500`, { waitUntil: "load", timeout: 20000 });
  await page.waitForFunction(() => document.body.dataset.ready === "true" && window.reviewView && window.historyStats.renders > 0, null, { timeout: 15000 });
  result.review = await page.evaluate(() => ({ rows: window.reviewView.waiting, count: document.querySelector("#waiting-count").textContent }));
  await page.screenshot({ path: join(shots, "review-waiting.png") });

  // 4. The scope list's filter.
  await page.goto(`${base}/?refresh=500`, { waitUntil: "load", timeout: 20000 });
  await page.waitForSelector("body[data-ready='true']", { timeout: 15000 });
  await page.fill("#scope-filter", scope.slice(0, 5));
  await page.waitForFunction((wanted) => {
    const rows = [...document.querySelectorAll("#scopes tbody tr")];
    return rows.length > 0 && rows.every((tr) => tr.dataset.scope.includes(wanted));
  }, scope.slice(0, 5), { timeout: 10000 });
  result.filtered = await page.evaluate(() => [...document.querySelectorAll("#scopes tbody tr")].map((tr) => tr.dataset.scope));
});
if (!process.exitCode) console.log(JSON.stringify(result));
