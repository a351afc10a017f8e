// The review inbox page: GET /review-queue?status=open|superseded|decided
// (&scope=), polled with If-None-Match, and POST
// /review-candidates/{id}/decision with the reviewer token kept in this
// tab's sessionStorage (like the dashboard keeps the API token: never in a
// URL, a cookie or a form field; sent only with a decision). Every value is
// shown with textContent. window.reviewView (read by the browser test):
// the rows shown, the decisions sent and the last message.
"use strict";

(() => {
  // No form ever submits (no inline handler: the page's CSP allows only its own scripts).
  document.addEventListener("DOMContentLoaded", () => {
    document.querySelectorAll("form").forEach((form) => form.addEventListener("submit", (event) => event.preventDefault()));
  });

  const { getJSON, cell, emptyRow, revisionLabel, runLabel, timelineUrl, poll, params, refreshMs, stats } = window.rlCommon;
  const REVIEWER_KEY = "recurrence-ledger.reviewer-token";
  const LIMIT = 200;
  const $ = (selector) => document.querySelector(selector);
  const view = (window.reviewView = { waiting: [], decided: [], sent: [], message: "", stale: "" });
  // Candidates whose decision was sent and not yet applied → when it was sent (ms).
  const pending = new Map();
  // A decision not applied this long after it was sent: no worker seems to be applying decisions.
  const STALE_MS = 10000;
  let shown = null; // the last answers rendered
  $("#filter-scope").value = params.get("scope") || "";

  // ---- the reviewer token

  function storedReviewer() {
    try { return sessionStorage.getItem(REVIEWER_KEY); } catch (_) { return null; }
  }

  function showReviewer(note) {
    const token = storedReviewer();
    $("#forget-reviewer").hidden = !token;
    $("#reviewer-state").textContent = note || (token ? "reviewer token kept for this tab" : "no reviewer token: read only");
  }

  function say(text) {
    view.message = text;
    $("#decision-message").textContent = text;
  }

  $("#reviewer-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const input = $("#reviewer-token");
    const token = input.value.trim();
    input.value = "";
    if (!token) return;
    try {
      sessionStorage.setItem(REVIEWER_KEY, token);
      showReviewer();
    } catch (_) {
      showReviewer("this browser does not allow session storage, which the page keeps the token in");
    }
  });
  $("#forget-reviewer").addEventListener("click", () => {
    try { sessionStorage.removeItem(REVIEWER_KEY); } catch (_) { /* storage disabled */ }
    showReviewer();
  });

  // ---- reading the queue

  function url(status) {
    const query = new URLSearchParams({ status, limit: String(LIMIT) });
    const scope = $("#filter-scope").value.trim();
    if (scope) query.set("scope", scope);
    return `/review-queue?${query}`;
  }

  function link(td, text, href) {
    td.textContent = "";
    const a = document.createElement("a");
    a.href = href;
    a.textContent = text;
    td.appendChild(a);
    return a;
  }

  const when = (iso) => iso.replace("T", " ").replace(/\.\d+Z$/, " UTC").replace(/Z$/, " UTC");
  const failures = (item) => item.failure_refs.map((ref) => `${ref.task_outcome_ref.source_id} ${ref.item_kind}[${ref.item_index}]`);

  function renderWaiting(items) {
    const body = $("#waiting tbody");
    body.replaceChildren();
    view.waiting = [];
    if (items.length === 0) emptyRow(body, "none: nothing waits for a decision");
    for (const item of items) {
      const tr = document.createElement("tr");
      tr.dataset.candidate = item.candidate_id;
      cell(tr, when(item.published_at));
      link(cell(tr, ""), item.scope_id, `/#scope=${encodeURIComponent(item.scope_id)}`);
      const revision = cell(tr, "");
      link(revision, revisionLabel(item.artifact_ref), timelineUrl(item.scope_id, item.artifact_ref));
      if (item.severity === "critical") {
        tr.classList.add("critical");
        const mark = document.createElement("span");
        mark.className = "severity critical";
        mark.textContent = "critical";
        revision.append(" ", mark);
      }
      cell(tr, item.signature_key);
      cell(tr, String(item.streak), "num");
      cell(tr, runLabel(item.run_start_position));
      cell(tr, failures(item).join(", "));
      const state = cell(tr, pending.has(item.candidate_id) ? `${item.status} · ${sentLabel(item.candidate_id)}` : item.status, "flag");
      if (item.status === "superseded" && item.fix_revision) {
        state.textContent = "superseded by ";
        const a = document.createElement("a");
        a.href = timelineUrl(item.scope_id, item.fix_revision);
        a.textContent = revisionLabel(item.fix_revision);
        state.appendChild(a);
      }
      const actions = cell(tr, "");
      for (const [kind, label] of [["approved", "Approve"], ["rejected", "Reject"]]) {
        const button = document.createElement("button");
        button.type = "button";
        button.className = kind === "approved" ? "approve" : "reject";
        button.textContent = label;
        button.disabled = pending.has(item.candidate_id);
        button.addEventListener("click", () => openForm(tr, item, kind));
        actions.appendChild(button);
      }
      tr.title = item.reason;
      body.appendChild(tr);
      view.waiting.push([item.candidate_id, item.scope_id, revisionLabel(item.artifact_ref), item.status, failures(item), item.severity || null]);
    }
  }

  function repairLabel(repair) {
    if (!repair) return "–";
    return `${repair.status} (selected ${repair.selected}, avoided ${repair.avoided}, recurred ${repair.recurred}, streak ${repair.terminal_recurred_streak})`;
  }

  function renderDecided(items) {
    const body = $("#decided tbody");
    body.replaceChildren();
    view.decided = [];
    if (items.length === 0) emptyRow(body, "none decided yet");
    for (const item of items) {
      const tr = document.createElement("tr");
      tr.dataset.candidate = item.candidate_id;
      const decision = item.decision || {};
      cell(tr, decision.decided_at ? when(decision.decided_at) : "–");
      link(cell(tr, ""), item.scope_id, `/#scope=${encodeURIComponent(item.scope_id)}`);
      link(cell(tr, ""), revisionLabel(item.artifact_ref), timelineUrl(item.scope_id, item.artifact_ref));
      cell(tr, item.status, `flag ${item.status}`);
      cell(tr, decision.reviewer || "–");
      cell(tr, decision.reason || "–");
      cell(tr, item.reason_code || "–");
      const fix = cell(tr, "–");
      if (item.fix_revision) link(fix, revisionLabel(item.fix_revision), timelineUrl(item.scope_id, item.fix_revision));
      cell(tr, repairLabel(item.repair), item.repair ? `flag repair-${item.repair.status}` : "");
      body.appendChild(tr);
      view.decided.push([item.candidate_id, item.status, decision.reviewer || null, decision.reason || null, item.reason_code || null,
        item.fix_revision ? revisionLabel(item.fix_revision) : null, item.repair ? item.repair.status : null]);
    }
  }

  function sentLabel(candidateId) {
    const waited = Date.now() - pending.get(candidateId);
    return waited < STALE_MS ? "decision sent, waiting for the ledger"
      : `decision sent ${Math.round(waited / 1000)} s ago, not applied yet: is a worker running?`;
  }

  // Decisions are applied by the ledger's worker, not by this page or the API: a decision still not applied
  // after STALE_MS says so, once per check, with what to start.
  function checkStale() {
    const now = Date.now();
    const stale = [...pending.values()].filter((sent) => now - sent >= STALE_MS);
    const notice = $("#stale-notice");
    if (!stale.length) {
      notice.hidden = true;
      notice.textContent = view.stale = "";
      return;
    }
    const oldest = Math.round((now - Math.min(...stale)) / 1000);
    view.stale = `${stale.length} decision${stale.length === 1 ? "" : "s"} sent, not applied after ${oldest} s: no worker seems to be `
      + "applying decisions. A worker of this deployment must run (recurrence-ledger worker, or run) for a decision to be applied; "
      + "it is applied as soon as one does.";
    notice.textContent = view.stale;
    notice.hidden = false;
    document.querySelectorAll("#waiting tr[data-candidate]").forEach((row) => {
      if (!pending.has(row.dataset.candidate)) return;
      const flag = row.querySelector("td.flag");
      if (flag && !flag.querySelector("a")) flag.textContent = flag.textContent.split(" · ")[0] + " · " + sentLabel(row.dataset.candidate);
    });
  }
  setInterval(checkStale, 1000);

  function render(opened, superseded, decided) {
    // Critical candidates first (contract §22), then oldest first.
    const critical = (item) => (item.severity === "critical" ? 0 : 1);
    const waiting = [...opened.candidates, ...superseded.candidates]
      .sort((a, b) => critical(a) - critical(b)
        || (a.published_at < b.published_at ? -1 : a.published_at > b.published_at ? 1 : a.candidate_id < b.candidate_id ? -1 : 1));
    for (const item of decided.candidates) {
      if (pending.delete(item.candidate_id)) say(`${revisionLabel(item.artifact_ref)} of ${item.scope_id}: ${item.status} by ${item.decision.reviewer}, applied by the ledger`);
    }
    // A decision being written survives the refresh (its row is drawn again with what was typed).
    const open = document.querySelector("#waiting tr.decision-row");
    const typing = open && { candidate: open.dataset.candidate, kind: open.dataset.kind,
      fix: open.querySelector(".fix-revision").value, reason: open.querySelector(".reason").value,
      code: open.querySelector(".reason-code").value };
    renderWaiting(waiting);
    const still = typing && waiting.find((item) => item.candidate_id === typing.candidate && !pending.has(item.candidate_id));
    if (still) {
      const row = openForm(document.querySelector(`#waiting tr[data-candidate="${CSS.escape(still.candidate_id)}"]`), still, typing.kind);
      row.querySelector(".fix-revision").value = typing.fix;
      row.querySelector(".reason").value = typing.reason;
      row.querySelector(".reason-code").value = typing.code;
    }
    renderDecided(decided.candidates);
    checkStale();
    const counts = decided.counts;
    $("#waiting-count").textContent = `${counts.open} open, ${counts.superseded} superseded`;
    $("#decided-count").textContent = `${counts.approved} approved, ${counts.rejected} rejected`;
    $("#queue-count").textContent = waiting.length + decided.candidates.length < opened.available + superseded.available + decided.available
      ? `showing the oldest ${LIMIT} of each list` : "";
    stats.renders += 1;
  }

  const refresh = poll(async () => {
    const answers = await Promise.all(["open", "superseded", "decided"].map((status) => getJSON(url(status))));
    if (answers.some((answer) => answer.changed) || shown === null) {
      shown = answers.map((answer) => answer.body);
      render(...shown);
    }
  }, refreshMs);

  // ---- deciding

  function closeForms() {
    document.querySelectorAll("#waiting tr.decision-row").forEach((row) => row.remove());
  }

  function openForm(tr, item, kind) {
    closeForms();
    const row = $("#decision-form").content.firstElementChild.cloneNode(true);
    row.dataset.candidate = item.candidate_id;
    row.dataset.kind = kind;
    row.querySelector(".decision-kind").textContent = kind === "approved" ? `Approve ${revisionLabel(item.artifact_ref)}` : `Reject ${revisionLabel(item.artifact_ref)}`;
    const fix = row.querySelector(".fix-revision");
    const reason = row.querySelector(".reason");
    row.querySelector("label.fix").hidden = kind !== "approved";
    const code = row.querySelector(".reason-code");
    row.querySelector("label.code").hidden = kind !== "rejected";  // contract §24: a code only with a rejection
    fix.min = String(item.artifact_ref.revision + 1);
    fix.placeholder = `optional: a revision of ${item.artifact_ref.artifact_id} above ${item.artifact_ref.revision}`;
    reason.required = kind === "rejected";
    reason.placeholder = kind === "rejected" ? "why (required)" : "optional";
    const form = row.querySelector("form");
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      // One request at a time: the send button is disabled until it is answered (a double click sends once).
      const button = form.querySelector("button.send");
      if (button.disabled) return;
      button.disabled = true;
      try {
        await send(item, kind, reason.value, kind === "approved" ? fix.value.trim() : "", kind === "rejected" ? code.value : "");
      } finally {
        button.disabled = false;
      }
    });
    row.querySelector(".cancel").addEventListener("click", () => row.remove());
    tr.after(row);
    (kind === "rejected" ? reason : fix).focus();
    return row;
  }

  function detailText(detail) {
    if (typeof detail === "string") return detail;
    if (Array.isArray(detail)) return detail.map((error) => error.msg).join("; ");
    return JSON.stringify(detail);
  }

  // The Idempotency-Key of a decision request: the same one while the same
  // decision (candidate and body) is sent again — a retry after a lost
  // answer gets the first answer and publishes nothing —, a new one for any
  // other. Random (crypto.getRandomValues: also on plain http).
  let lastRequest = null;
  function idempotencyKey(candidateId, body) {
    if (!lastRequest || lastRequest.candidateId !== candidateId || lastRequest.body !== body) {
      const bytes = crypto.getRandomValues(new Uint8Array(16));
      lastRequest = { candidateId, body, key: Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("") };
    }
    return lastRequest.key;
  }

  async function send(item, kind, reason, fix, code = "") {
    const token = storedReviewer();
    if (!token) {
      say("enter your reviewer token first");
      $("#reviewer-token").focus();
      return;
    }
    if (kind === "rejected" && !reason.trim()) {
      say("a rejection needs a reason");
      return;
    }
    const body = { decision: kind, reason: reason.trim() ? reason : null };
    if (fix) body.fix_revision = { family: "experience", artifact_id: item.artifact_ref.artifact_id, revision: Number(fix) };
    if (code) body.reason_code = code;
    const key = idempotencyKey(item.candidate_id, JSON.stringify(body));
    let response;
    try {
      response = await fetch(`/review-candidates/${encodeURIComponent(item.candidate_id)}/decision`, {
        method: "POST", cache: "no-store", credentials: "omit", referrerPolicy: "no-referrer",
        headers: { "Content-Type": "application/json", Authorization: `Bearer ${token}`, "Idempotency-Key": key }, body: JSON.stringify(body),
      });
    } catch (error) {
      say(`the decision was not sent: ${error.message}`);
      return;
    }
    let answer = {};
    try { answer = await response.json(); } catch (_) { /* not JSON */ }
    if (response.status === 202) {
      pending.set(item.candidate_id, Date.now());
      view.sent.push([item.candidate_id, answer.decision_id, answer.decision.decision, answer.decision.reviewer, answer.decision.reason_code || null]);
      say(`${kind === "approved" ? "approval" : "rejection"} of ${revisionLabel(item.artifact_ref)} sent as ${answer.decision.reviewer} `
        + `(decision ${answer.decision_id.slice(7, 19)}…): waiting for the ledger to apply it`);
      closeForms();
      if (shown) render(...shown);
      refresh();
      return;
    }
    if (response.status === 401 || response.status === 403) showReviewer("reviewer token refused");
    say(`${response.status}: ${detailText(answer.detail || response.statusText)}`);
  }

  showReviewer();
  let timer = null;
  $("#filter-scope").addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(() => { shown = null; refresh(); }, 250); });
})();
