// Shared by the history pages (timeline.html, review.html) and the dashboard
// (index.html loads it before dashboard.js, after login.js): GET JSON with
// If-None-Match (an unchanged answer is a 304 and costs no rendering) and the
// tab's API token (login.js), DOM cell helpers, labels, polling. Every value
// shown comes from the API; nothing is recomputed.
"use strict";

(() => {
  const stats = (window.historyStats = { polls: 0, notModified: 0, renders: 0, errors: 0, lastError: null });

  // The tab's API token and the status line (login.js).
  const { storedToken, setStatus, ask } = window.rlLogin;

  // What a getter throws for a 401: the API wants its token. tokenRefused:
  // this tab sent one and the API did not accept it (else it sent none).
  class Unauthorized extends Error {
    constructor(tokenRefused) {
      super("401 this API needs its token");
      this.tokenRefused = tokenRefused;
    }
  }

  // jsonClient(counters) -> get(url): GET url as JSON with If-None-Match and
  // the tab's API token (when it has one), with an ETag cache of its own;
  // counts polls and 304s in counters. get returns {body, changed, status};
  // body is null for a 404 (the scope left the view). It throws Unauthorized
  // for a 401, Error on other errors (message from the API's detail).
  // get.forget() empties its cache. Every page's getJSON is one of these.
  function jsonClient(counters) {
    const cache = new Map(); // url -> {etag, body}
    async function get(url) {
      const previous = cache.get(url);
      const headers = previous ? { "If-None-Match": previous.etag } : {};
      const token = storedToken();
      if (token) headers.Authorization = `Bearer ${token}`;
      counters.polls += 1;
      const response = await fetch(url, { headers, cache: "no-store", credentials: "omit", referrerPolicy: "no-referrer" });
      if (response.status === 401) throw new Unauthorized(Boolean(token));
      if (response.status === 304 && previous) {
        counters.notModified += 1;
        return { body: previous.body, changed: false, status: 304 };
      }
      if (response.status === 404) {
        cache.delete(url);
        return { body: null, changed: true, status: 404 };
      }
      if (!response.ok) {
        let detail = response.statusText;
        try { detail = (await response.json()).detail; } catch (_) { /* not JSON */ }
        throw new Error(`${response.status} ${typeof detail === "string" ? detail : JSON.stringify(detail)}`);
      }
      const body = await response.json();
      cache.set(url, { etag: response.headers.get("ETag"), body });
      return { body, changed: true, status: response.status };
    }
    get.forget = () => cache.clear();
    return get;
  }

  function cell(row, text, className) {
    const td = document.createElement("td");
    td.textContent = text; // ids and signatures are data: never innerHTML
    if (className) td.className = className;
    row.appendChild(td);
    return td;
  }

  function emptyRow(body, text) {
    const tr = document.createElement("tr");
    tr.className = "empty";
    const td = cell(tr, text);
    td.colSpan = body.closest("table").querySelectorAll("thead th").length;
    body.appendChild(tr);
  }

  const revisionLabel = (ref) => `${ref.artifact_id} r${ref.revision}`;
  const runLabel = (start) => (start === null || start === undefined ? "start of history" : `from ${start}`);
  const timelineUrl = (scope, ref) =>
    `/timeline?scope=${encodeURIComponent(scope)}&artifact_id=${encodeURIComponent(ref.artifact_id)}&revision=${ref.revision}`;

  // Poll `refresh` now and every `ms`; errors are shown in #status and
  // retried; a 401 asks for the API token (login.js) and polls again once it
  // is given.
  function poll(refresh, ms) {
    let running = false;
    let again = false;
    async function tick() {
      if (window.rlLogin.awaiting()) return;
      if (running) { again = true; return; }
      running = true;
      again = false;
      try {
        await refresh();
        document.body.dataset.ready = "true";
        setStatus(`live · refreshed ${new Date().toLocaleTimeString()} · every ${ms / 1000} s`, false);
      } catch (error) {
        if (error instanceof Unauthorized) {
          stats.unauthorized = (stats.unauthorized || 0) + 1;
          ask(error.tokenRefused, tick);
          return;
        }
        stats.errors += 1;
        stats.lastError = String(error);
        setStatus(`cannot read the view: ${error.message} (retrying)`, true);
      } finally {
        running = false;
        if (again) tick();
      }
    }
    tick();
    setInterval(tick, ms);
    return tick;
  }

  const params = new URLSearchParams(location.search);
  const refreshMs = Math.max(250, Number(params.get("refresh")) || 5000);

  window.rlCommon = { getJSON: jsonClient(stats), jsonClient, Unauthorized, cell, emptyRow, revisionLabel, runLabel, timelineUrl, poll, params, refreshMs, stats };
})();
