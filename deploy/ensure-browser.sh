#!/usr/bin/env bash
# Install what the dashboard's browser test (tests/e2e/test_dashboard_browser.py)
# needs on a fresh Debian 12 machine:
#
# - Debian's Chromium at /usr/bin/chromium (apt-get, only when it is missing;
#   the browser builds that test tools download themselves cannot be fetched
#   here, so `npx playwright install` is never used);
# - playwright-core, pinned in tests/e2e/browser/package.json and
#   package-lock.json, into tests/e2e/browser/node_modules (`npm ci`, or
#   `npm install` when there is no lock file), only when it is not there yet
#   at the pinned version.
#
# Usage: deploy/ensure-browser.sh     (needs root when chromium is missing)
#
# Environment: CHROMIUM (default /usr/bin/chromium) is the browser the test
# launches; when it points elsewhere and exists, apt-get is not used.
# All messages go to stderr.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd -- "$SCRIPT_DIR/.." && pwd)"
BROWSER_DIR="$REPO_DIR/tests/e2e/browser"
export RL_LOG_TAG="ensure-browser.sh"
# shellcheck source=_common.sh
source "$SCRIPT_DIR/_common.sh"

chromium="${CHROMIUM:-/usr/bin/chromium}"
if [[ -x $chromium ]]; then
    log "chromium present: $("$chromium" --version 2>/dev/null || echo "$chromium")"
else
    log "$chromium is missing; installing Debian's chromium"
    # fonts-liberation: metric-compatible fonts, so screenshots have legible text.
    apt_install chromium fonts-liberation
    [[ -x $chromium ]] || die "apt-get installed chromium but $chromium does not exist"
    log "installed: $("$chromium" --version 2>/dev/null || echo "$chromium")"
fi

command -v node >/dev/null 2>&1 || die "node is not on PATH (Node.js ≥ 20 with npm is needed for playwright-core)"
command -v npm >/dev/null 2>&1 || die "npm is not on PATH"

pinned="$(node -p "require('$BROWSER_DIR/package.json').dependencies['playwright-core']")"
installed="$(node -p "try { require('$BROWSER_DIR/node_modules/playwright-core/package.json').version } catch (e) { '' }")"
if [[ $installed == "$pinned" ]]; then
    log "playwright-core $installed present in tests/e2e/browser/node_modules"
    exit 0
fi
cd "$BROWSER_DIR"
if [[ -f package-lock.json ]]; then
    log "npm ci (playwright-core $pinned)"
    npm ci --no-audit --no-fund >&2
else
    log "npm install (playwright-core $pinned)"
    npm install --no-audit --no-fund >&2
fi
log "done: playwright-core $(node -p "require('./node_modules/playwright-core/package.json').version")"
