// The headless Debian Chromium of the browser drivers (playwright-core, the
// system's chromium: no browser download), shared by dashboard.mjs,
// timeline.mjs and review.mjs.
//
// withChromium(viewport, run): launches Chromium with a fresh profile (a
// temporary folder), calls run(page) with its first page, and always closes
// the browser and removes the profile; an error of run goes to stderr and
// sets exit code 1.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

export async function withChromium(viewport, run) {
  const profile = mkdtempSync(join(tmpdir(), "rl-chromium-"));
  let context;
  try {
    context = await chromium.launchPersistentContext(profile, {
      executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
      headless: true,
      args: [
        // --disable-gpu-sandbox: on some kernels the GPU process's sandbox setup
        // fails ("thread_helpers.cc Check failed: Permission denied") and takes
        // the browser down; --no-sandbox alone does not turn it off.
        "--headless", "--no-sandbox", "--disable-gpu-sandbox", "--disable-gpu", "--in-process-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
      ],
      viewport,
      deviceScaleFactor: 1,
    });
    await run(context.pages()[0] || (await context.newPage()));
  } catch (error) {
    console.error(String(error && error.stack ? error.stack : error));
    process.exitCode = 1;
  } finally {
    if (context) await context.close();
    rmSync(profile, { recursive: true, force: true });
  }
}
