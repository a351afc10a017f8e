// Drives the dashboard in headless Debian Chromium with playwright-core (no
// browser download: executablePath is the system's chromium) for
// tests/e2e/test_dashboard_browser.py.
//
// Usage: node dashboard.mjs URL SCREENSHOT.png
//
// With RL_DASHBOARD_TOKEN set (the API token; in the environment, not on the
// command line), step 1 first waits for the page's token form, types
// RL_DASHBOARD_WRONG_TOKEN (when set) and waits for the refusal, then types
// the token; the snapshot then also has "auth": what the page showed before
// the token, the refusal message, every request URL that contains the token
// (none expected), the API requests sent without the Bearer token after it
// was given, and where the page keeps it (sessionStorage only).
//
// With RL_DASHBOARD_LIVE set (the page may open before the view has a
// scope, and the view is being written while it is open, e.g. by a worker
// fed by `recurrence-ledger simulate`), step 1 waits up to 120 s for the
// first scope's panel, then for a second render instead of a poll answered
// 304 (an always-changing view never answers 304), and "select" and
// "expect" wait up to 60 s instead of 10 s.
//
// Protocol (one JSON object per line on stdout):
//   1. loads URL, waits for the first render and for one poll answered 304
//      (with RL_DASHBOARD_LIVE: for a second render), saves a full-page
//      screenshot to SCREENSHOT.png, prints a snapshot of what the page
//      shows;
//   2. then, for every line "expect <counter> <value>" read on stdin, waits
//      (10 s at most; 60 s with RL_DASHBOARD_LIVE) until the page shows that
//      value for that counter both in the scope's panel and in its
//      scopes-table row, and prints a new snapshot; for every line "select <scope>", waits until the scope is
//      listed, clicks its row in the scopes table, waits until its panel is
//      rendered, and prints a new snapshot; for every line "screenshot
//      <path>", saves a full-page screenshot there and prints a new
//      snapshot; for every line "look", prints a snapshot of what the
//      page shows now (no waiting). The browser closes when stdin ends.
// Errors go to stderr and exit code 1.
import { createInterface } from "node:readline";
import { withChromium } from "./chromium.mjs";

const [url, screenshot] = process.argv.slice(2);
if (!url || !screenshot) {
  console.error("usage: node dashboard.mjs URL SCREENSHOT.png");
  process.exit(2);
}

// What the page shows, read from the DOM as a user sees it, plus the data the
// Chart.js chart actually drew and the page's poll counters.
function snapshot() {
  const text = (node) => (node ? node.textContent.trim() : null);
  const rows = (selector) =>
    [...document.querySelectorAll(`${selector} tbody tr`)].map((tr) => [...tr.querySelectorAll("td")].map(text));
  const counters = {};
  for (const node of document.querySelectorAll("#detail [data-counter]")) counters[node.dataset.counter] = text(node);
  const chart = Chart.getChart(document.querySelector("#streak-chart"));
  const shown = (node) => Boolean(node) && !node.hidden && node.offsetHeight > 0;
  const needing = document.querySelector('#detail [data-counter="needing_review"]');
  return {
    scope: text(document.querySelector("#scope-name")),
    asOf: text(document.querySelector("#scope-as-of")),
    counters,
    scopes: rows("#scopes"),
    revisions: rows("#revisions"),
    review: rows("#review"),
    reviewRowClasses: [...document.querySelectorAll("#revisions tbody tr")].map((tr) => tr.className),
    chart: chart ? { labels: chart.data.labels, data: chart.data.datasets[0].data, colors: chart.data.datasets[0].backgroundColor } : null,
    gapsHeading: text(document.querySelector(".gaps h3")),
    needingReview: { alert: needing.classList.contains("alert"), color: getComputedStyle(needing).color },
    reviewPanelAlert: document.querySelector(".review-panel").classList.contains("alert"),
    reviewSplit: shown(document.querySelector("#review-split")) ? text(document.querySelector("#review-split")).replace(/\s+/g, " ") : null,
    chartShown: shown(document.querySelector(".chart-box")),
    noStreakNote: shown(document.querySelector("#no-revisions")) ? text(document.querySelector("#no-revisions")) : null,
    status: text(document.querySelector("#status")),
    stats: { ...window.dashboardStats },
    // Contract §17: the unknown selections by reason and the binding suspects.
    unknown: (() => {
      const unknownChart = Chart.getChart(document.querySelector("#unknown-chart"));
      return {
        shown: shown(document.querySelector(".unknown-box")),
        scopeReasons: [...document.querySelectorAll("#scope-reasons .reason")].map(text),
        scopeReasonsNone: shown(document.querySelector("#no-scope-reasons")),
        rows: rows("#unknown"),
        rowReasons: [...document.querySelectorAll("#unknown tbody tr")].map((tr) => [...tr.querySelectorAll(".reason")].map(text)),
        suspectReasons: [...document.querySelectorAll("#unknown .reason.suspect-reason")].map(text),
        reasonTitles: [...document.querySelectorAll("#unknown .reason")].map((chip) => chip.title),
        chart: unknownChart
          ? { labels: unknownChart.data.labels, datasets: unknownChart.data.datasets.map((d) => ({ label: d.label, data: d.data, color: d.backgroundColor })) }
          : null,
      };
    })(),
    suspects: {
      count: text(document.querySelector("#suspect-count")),
      threshold: text(document.querySelector("#suspect-threshold")),
      rows: rows("#suspects"),
      fixReasons: [...document.querySelectorAll("#suspects td.fix")].map((td) => td.dataset.reason || null),
      also: [...document.querySelectorAll("#suspects td.fix .also")].map(text),
      panelAlert: document.querySelector(".suspects-panel").classList.contains("alert"),
      counterColor: getComputedStyle(document.querySelector('#detail [data-counter="binding_suspects"]')).color,
    },
  };
}

await withChromium({ width: 1100, height: 860 }, async (page) => {
  const consoleErrors = [];
  page.on("console", (message) => { if (message.type() === "error") consoleErrors.push(message.text()); });
  page.on("pageerror", (error) => consoleErrors.push(String(error)));
  const token = process.env.RL_DASHBOARD_TOKEN || "";
  const wrongToken = process.env.RL_DASHBOARD_WRONG_TOKEN || "";
  const requests = []; // {url, bearer, afterToken}
  let tokenGiven = false;
  page.on("request", (request) => {
    const auth = request.headers().authorization || "";
    requests.push({ url: request.url(), bearer: token !== "" && auth === `Bearer ${token}`, afterToken: tokenGiven });
  });

  await page.goto(url, { waitUntil: "load", timeout: 20000 });
  let auth = null;
  if (token) {
    await page.waitForSelector("#login:not([hidden])", { timeout: 15000 });
    const before = await page.evaluate(() => ({
      loginShown: !document.querySelector("#login").hidden,
      scopesShown: !document.querySelector("#scopes-section").hidden,
      detailShown: !document.querySelector("#detail").hidden,
      scopeRows: document.querySelectorAll("#scopes tbody tr").length,
      status: document.querySelector("#status").textContent.trim(),
      unauthorized: window.dashboardStats.unauthorized,
    }));
    let rejected = null;
    if (wrongToken) {
      await page.fill("#token-input", wrongToken);
      await page.press("#token-input", "Enter");
      await page.waitForSelector("#login:not([hidden]) #login-error:not([hidden])", { timeout: 15000 });
      rejected = await page.textContent("#login-error");
    }
    tokenGiven = true;
    await page.fill("#token-input", token);
    await page.click("#login-form button[type=submit]");
    auth = { before, rejected };
  }
  const live = Boolean(process.env.RL_DASHBOARD_LIVE);
  const patience = live ? 60000 : 10000; // the waits of "select" and "expect" (a live page's machine is busy)
  await page.waitForSelector("body[data-ready='true'] #detail:not([hidden])", { timeout: live ? 120000 : 15000 });
  if (live) await page.waitForFunction(() => window.dashboardStats.renders >= 2, null, { timeout: 15000 });
  else await page.waitForFunction(() => window.dashboardStats.notModified >= 1, null, { timeout: 15000 });
  await page.screenshot({ path: screenshot, fullPage: true });
  if (token) {
    const stored = await page.evaluate((key) => ({
      session: sessionStorage.getItem(key),
      local: Object.keys(localStorage).length,
      location: location.href,
      loginShown: !document.querySelector("#login").hidden,
      forgetShown: !document.querySelector("#forget-token").hidden,
    }), "recurrence-ledger.api-token");
    const api = requests.filter((r) => r.afterToken && new URL(r.url).pathname.startsWith("/scopes"));
    auth = {
      ...auth,
      urlsWithToken: requests.filter((r) => r.url.includes(token) || (wrongToken && r.url.includes(wrongToken))).map((r) => r.url),
      apiRequests: api.length,
      apiRequestsWithoutBearer: api.filter((r) => !r.bearer).map((r) => r.url),
      sessionHasToken: stored.session === token,
      localStorageKeys: stored.local,
      locationHasToken: stored.location.includes(token),
      loginShown: stored.loginShown,
      forgetShown: stored.forgetShown,
    };
  }
  console.log(JSON.stringify({ ...(await page.evaluate(snapshot)), consoleErrors, ...(auth ? { auth } : {}) }));

  const lines = createInterface({ input: process.stdin });
  for await (const line of lines) {
    const [verb, counter, value] = line.trim().split(/\s+/);
    if (verb === "look") {
      console.log(JSON.stringify({ ...(await page.evaluate(snapshot)), consoleErrors }));
      continue;
    }
    if (verb === "screenshot") {
      await page.screenshot({ path: counter, fullPage: true });
      console.log(JSON.stringify({ ...(await page.evaluate(snapshot)), consoleErrors }));
      continue;
    }
    if (verb === "select") {
      const scope = counter;
      const row = `#scopes tbody tr[data-scope="${scope}"]`;
      await page.waitForSelector(row, { timeout: patience });
      await page.click(row);
      await page.waitForFunction(
        (wanted) => document.querySelector("#scope-name").textContent === wanted && location.hash === `#scope=${encodeURIComponent(wanted)}`,
        scope,
        { timeout: patience },
      );
      console.log(JSON.stringify({ ...(await page.evaluate(snapshot)), consoleErrors }));
      continue;
    }
    if (verb !== "expect") continue;
    // Every place the counter is shown: the scope's panel and its row in the
    // scopes table (two requests, so possibly one poll apart).
    await page.waitForFunction(
      ([name, wanted]) => {
        const nodes = [...document.querySelectorAll(`#detail [data-counter="${name}"], #scopes tr.selected [data-field="${name}"]`)];
        return nodes.length === 2 && nodes.every((node) => node.textContent === wanted);
      },
      [counter, value],
      { timeout: patience },
    );
    console.log(JSON.stringify({ ...(await page.evaluate(snapshot)), consoleErrors }));
  }
});
