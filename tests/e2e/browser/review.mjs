// Drives the review inbox (/review) in headless Debian Chromium with
// playwright-core (the system's chromium, no browser download) for
// tests/e2e/test_review_browser.py.
//
// Usage: node review.mjs BASE_URL CANDIDATE_ID SCREENSHOT
// Reads the reviewer token, the reason and the reason code (contract §24;
// an empty line: none) from stdin (one line each: never in argv, which
// other users of the machine can read).
//
// 1. opens BASE_URL/review?refresh=300; with RL_BROWSER_API_TOKEN in the
//    environment (the API token, as production runs) waits for the page's
//    token form (the page loads without the token, then asks for it) and
//    enters the token; waits for CANDIDATE_ID's row in the waiting table
//    and prints the page's state (window.reviewView, and "asked": the
//    status the page showed while it asked);
// 2. enters the reviewer token, clicks the row's Reject button (Approve with
//    RL_BROWSER_DECISION=approved, typing RL_BROWSER_FIX as the fix revision
//    when set), types the reason (if any) into the form it opens, picks the
//    reason code (if any), double-clicks send (one decision must be sent),
//    waits for the page to say the decision was sent and for its button to be
//    usable again — with RL_BROWSER_EXPECT_STALE=1 (no worker runs yet) also
//    for the page to say that no worker seems to apply decisions — and
//    prints the state again;
// 3. on the line "wait" from stdin, waits (up to 120 s of polls) until the
//    candidate is in the decided table and the no-worker notice is gone,
//    prints the state and saves SCREENSHOT.
// Prints one JSON object per step on stdout; errors go to stderr and exit code 1.
import { createInterface } from "node:readline";
import { withChromium } from "./chromium.mjs";

const [base, candidateId, screenshot] = process.argv.slice(2);
if (!screenshot) {
  console.error("usage: node review.mjs BASE_URL CANDIDATE_ID SCREENSHOT  (token and reason on stdin)");
  process.exit(2);
}
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const nextLine = async () => ((await lines.next()).value || "").trim();

const consoleErrors = [];
const posts = [];
const token = await nextLine();
const reason = await nextLine();
const reasonCode = await nextLine();
const decision = process.env.RL_BROWSER_DECISION || "rejected";
const fixRevision = process.env.RL_BROWSER_FIX || "";
await withChromium({ width: 1280, height: 900 }, async (page) => {
  page.on("console", (message) => { if (message.type() === "error") consoleErrors.push(message.text()); });
  page.on("pageerror", (error) => consoleErrors.push(String(error)));
  page.on("request", (request) => {
    if (request.method() === "POST") {
      posts.push({ url: request.url(), bearer: request.headers().authorization === `Bearer ${token}`, body: request.postData(),
        idempotencyKey: request.headers()["idempotency-key"] || null });
    }
  });
  const state = async () => ({
    ...(await page.evaluate(() => ({ view: window.reviewView, stats: window.historyStats, url: location.href,
      csp: document.querySelectorAll("[onclick], [onsubmit], [onchange], [oninput]").length,
      criticalMarks: document.querySelectorAll("#waiting tbody tr.critical .severity.critical").length,
      stored: (() => { try { return Object.keys(sessionStorage); } catch (_) { return null; } })() }))),
    consoleErrors, posts, asked,
  });

  // 1. The candidate waits.
  const response = await page.goto(`${base}/review?refresh=300`, { waitUntil: "load", timeout: 20000 });
  if (response.status() !== 200) throw new Error(`GET /review answered ${response.status()}`);
  let asked = null;
  const apiToken = process.env.RL_BROWSER_API_TOKEN || "";
  if (apiToken) {
    await page.waitForSelector("body[data-auth='required'] #login:not([hidden])", { timeout: 20000 });
    asked = await page.evaluate(() => document.querySelector("#status").textContent);
    await page.fill("#token-input", apiToken);
    await page.press("#token-input", "Enter");
  }
  const row = `#waiting tbody tr[data-candidate="${candidateId}"]`;
  await page.waitForSelector(`body[data-ready='true'] ${row}`, { timeout: 20000 });
  console.log(JSON.stringify(await state()));

  // 2. Reject it with a reason.
  await page.fill("#reviewer-token", token);
  await page.click("#keep-reviewer");
  await page.click(`${row} button.${decision === "approved" ? "approve" : "reject"}`);
  await page.waitForSelector(`#waiting tr.decision-row[data-candidate="${candidateId}"] input.reason`, { timeout: 5000 });
  if (reason) await page.fill(`#waiting tr.decision-row[data-candidate="${candidateId}"] input.reason`, reason);
  if (decision === "approved" && fixRevision) await page.fill(`#waiting tr.decision-row[data-candidate="${candidateId}"] input.fix-revision`, fixRevision);
  if (reasonCode) await page.selectOption(`#waiting tr.decision-row[data-candidate="${candidateId}"] select.reason-code`, reasonCode);
  await page.dblclick(`#waiting tr.decision-row[data-candidate="${candidateId}"] button.send`);
  await page.waitForFunction(() => window.reviewView.sent.length === 1, null, { timeout: 20000 });
  // The send button is usable again once the request is answered (its form closes on a 202).
  await page.waitForSelector(`#waiting tr.decision-row[data-candidate="${candidateId}"] button.send:disabled`, { state: "detached", timeout: 20000 });
  // No worker runs yet: after a few seconds the page says the decision is not being applied.
  if (process.env.RL_BROWSER_EXPECT_STALE === "1") {
    await page.waitForFunction(() => window.reviewView.stale !== "", null, { timeout: 30000 });
  }
  console.log(JSON.stringify(await state()));

  // 3. The ledger applies it: the page shows it decided.
  if ((await nextLine()) !== "wait") throw new Error("expected the line 'wait'");
  await page.waitForSelector(`#decided tbody tr[data-candidate="${candidateId}"]`, { timeout: 120000 });
  await page.waitForFunction((id) => !window.reviewView.waiting.some((item) => item[0] === id), candidateId, { timeout: 10000 });
  await page.waitForFunction(() => window.reviewView.stale === "", null, { timeout: 10000 });
  await page.screenshot({ path: screenshot, fullPage: true });
  console.log(JSON.stringify(await state()));
});
process.exit(process.exitCode || 0);
