// Drives the team patterns page in headless Debian Chromium with
// playwright-core (the system's chromium, no browser download) for
// tests/e2e/test_patterns_browser.py.
//
// Usage: node patterns.mjs BASE_URL GROUP OTHER_GROUP SCREENSHOT
//
// 1. opens BASE_URL/team-patterns?group=GROUP, waits for its rows, reads the
//    column headers (text and title), the rows, the heading, the count and
//    the export command, screenshots SCREENSHOT;
// 2. types OTHER_GROUP into the group field, submits, waits for that
//    group's rows and reads them and the page's URL.
// Prints one JSON object on stdout; errors go to stderr and exit code 1.
import { withChromium } from "./chromium.mjs";

const [base, group, other, screenshot] = process.argv.slice(2);
if (!screenshot) {
  console.error("usage: node patterns.mjs BASE_URL GROUP OTHER_GROUP SCREENSHOT");
  process.exit(2);
}

const result = { consoleErrors: [] };
await withChromium({ width: 1100, height: 700 }, async (page) => {
  page.on("console", (message) => { if (message.type() === "error") result.consoleErrors.push(message.text()); });
  page.on("pageerror", (error) => result.consoleErrors.push(String(error)));
  const read = () => page.evaluate(() => ({
    view: window.patternsView,
    headers: [...document.querySelectorAll("#patterns thead th")].map((th) => [th.textContent, th.title]),
    cells: [...document.querySelectorAll("#patterns tbody tr")].map((tr) => [...tr.querySelectorAll("td")].map((td) => td.textContent)),
    heading: document.querySelector("#group-name").textContent,
    count: document.querySelector("#pattern-count").textContent,
    command: document.querySelector("#export-command").value,
  }));

  const response = await page.goto(`${base}/team-patterns?group=${encodeURIComponent(group)}&refresh=400`, { waitUntil: "load", timeout: 20000 });
  result.csp = response.headers()["content-security-policy"] || null;
  await page.waitForFunction((wanted) => document.body.dataset.ready === "true" && window.patternsView.group === wanted && window.patternsView.rows.length > 0,
    group, { timeout: 15000 });
  result.first = await read();
  await page.screenshot({ path: screenshot });

  await page.fill("#group-input", other);
  await page.press("#group-input", "Enter");
  await page.waitForFunction((wanted) => window.patternsView.group === wanted, other, { timeout: 15000 });
  result.second = await read();
  result.url = page.url();
});
console.log(JSON.stringify(result));
