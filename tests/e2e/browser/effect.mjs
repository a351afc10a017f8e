// Drives the dashboard's effect panel (contract §21.4) in headless Debian
// Chromium with playwright-core for tests/e2e/test_effect_browser.py.
//
// Usage: node effect.mjs URL SCREENSHOT
//
// Opens URL (the dashboard with #scope=…), waits until the effect table has
// rows, reads the panel — each row's cells (by data-field) and class, the
// lists of lessons that harm and help, the scope's counts by verdict, the
// panel's alert mark, the column titles the field catalogue gave — and the
// credible interval the page computes for a few arms, screenshots the panel
// and prints one JSON object on stdout; errors go to stderr and exit code 1.
import { withChromium } from "./chromium.mjs";

const [url, screenshot] = process.argv.slice(2);
if (!screenshot) {
  console.error("usage: node effect.mjs URL SCREENSHOT");
  process.exit(2);
}

const result = { consoleErrors: [] };
await withChromium({ width: 1200, height: 1600 }, async (page) => {
  page.on("console", (message) => { if (message.type() === "error") result.consoleErrors.push(message.text()); });
  page.on("pageerror", (error) => result.consoleErrors.push(String(error)));
  await page.goto(url, { waitUntil: "load", timeout: 20000 });
  await page.waitForSelector("body[data-ready='true'] #detail:not([hidden])", { timeout: 15000 });
  await page.waitForFunction(() => document.querySelectorAll("#effects tbody tr[data-verdict]").length > 0, null, { timeout: 15000 });
  Object.assign(result, await page.evaluate(() => ({
    rows: [...document.querySelectorAll("#effects tbody tr")].map((tr) => ({
      revision: tr.dataset.revision,
      verdict: tr.dataset.verdict,
      className: tr.className,
      cells: Object.fromEntries([...tr.querySelectorAll("td[data-field]")].map((td) => [td.dataset.field, td.textContent])),
      verdictColor: getComputedStyle(tr.querySelector('td[data-field="verdict"]')).color,
    })),
    harms: document.querySelector("#effect-harms").textContent,
    helps: document.querySelector("#effect-helps").textContent,
    counts: Object.fromEntries([...document.querySelectorAll("#effect-counts [data-verdict]")].map((node) => [node.dataset.verdict, node.textContent])),
    panelAlert: document.querySelector(".effect-panel").classList.contains("alert"),
    headers: [...document.querySelectorAll("#effects thead th")].filter((th) => !th.hidden).map((th) => th.textContent),
    headerTitles: Object.fromEntries([...document.querySelectorAll("#effects th[data-effect-label]")].map((th) => [th.dataset.effectLabel, th.title])),
    intervals: [[1, 5], [4, 5], [0, 5], [7, 10], [3, 10], [0, 0]].map(([f, n]) => window.rlEffect.credibleInterval(f, n)),
  })));
  await page.locator(".effect-panel").screenshot({ path: screenshot });
});
console.log(JSON.stringify(result));
