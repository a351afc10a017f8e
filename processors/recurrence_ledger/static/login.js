// The API token login of every page (index.html, review.html, timeline.html, patterns.html
// load it first): this file renders the #login form at the top of <main>,
// keeps the token and handles the form; the pages' own scripts only ask for
// it (window.rlLogin.ask) when the API answers 401. One token for the tab.
//
// Why sessionStorage and a Bearer header, not a login form setting a cookie:
// the token never leaves the page except in the "Authorization: Bearer …"
// header every fetch sends (history-common.js) — never in a URL, a form
// field, a Referer or an access log — and a header is not something the
// browser attaches by itself, so no other site can make the browser use it
// (no cross-site request forgery, no cookie to scope or expire, no login
// endpoint on the server); sessionStorage is per tab and gone when the tab
// closes. The cost is that the page's scripts can read it, which is why the
// pages are served with a Content-Security-Policy that runs only this
// service's own scripts (processors/recurrence_ledger/api/responses.py,
// PAGE_HEADERS) and render every value with textContent.
"use strict";

(() => {
  const TOKEN_KEY = "recurrence-ledger.api-token";
  const REFUSED = "The token was not accepted.";
  const NO_STORAGE = "This browser does not allow session storage, which the page keeps the token in.";

  // The tab's API token, or null (none given, or storage disabled).
  function storedToken() {
    try { return sessionStorage.getItem(TOKEN_KEY); } catch (_) { return null; }
  }

  // The page's status line (#status): text, red when isError.
  function setStatus(text, isError) {
    const status = document.querySelector("#status");
    if (!status) return;
    status.textContent = text;
    status.classList.toggle("error", Boolean(isError));
  }

  // element("p", {id: "x"}, "text", child…): a node built without innerHTML.
  function element(tag, attributes, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
    node.append(...children);
    return node;
  }

  // The #login section, hidden until asked for. No name on the input and no
  // navigation: the token is never submitted as a form field.
  const input = element("input", { id: "token-input", type: "password", autocomplete: "off", spellcheck: "false", required: "" });
  const note = element("p", { id: "login-error", class: "error-note", role: "alert", hidden: "" });
  const form = element("form", { id: "login-form", method: "post", autocomplete: "off" },
    element("label", { for: "token-input" }, "token"), input, element("button", { type: "submit" }, "Show the view"));
  const section = element("section", { id: "login", class: "panel login", hidden: "", "aria-labelledby": "login-title" },
    element("h2", { id: "login-title" }, "API token"),
    element("p", { class: "note" },
      "This service needs its API token (serve's RL_API_TOKEN or --token-file). The page keeps it in this tab's " +
      "session storage only and sends it as an Authorization header: never in a URL, gone when the tab closes."),
    form, note);
  document.querySelector("main").prepend(section);

  const waiting = []; // the polls stopped until a token is given
  let awaitingToken = false;

  function showNote(text) {
    note.hidden = !text;
    note.textContent = text;
  }

  // ask(refused, resume): the API answered 401 (refused: to a token this tab
  // sent). Forgets the stored token, shows the form and calls resume() once
  // a token is given; every resume asked for meanwhile waits for the same one.
  function ask(refused, resume) {
    if (!waiting.includes(resume)) waiting.push(resume);
    if (awaitingToken) return;
    awaitingToken = true;
    try { sessionStorage.removeItem(TOKEN_KEY); } catch (_) { /* storage disabled */ }
    section.hidden = false;
    showNote(refused ? REFUSED : "");
    document.body.dataset.auth = "required";
    setStatus("API token required", true);
    input.focus();
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault(); // never a navigation: the token stays out of URLs
    const token = input.value.trim();
    input.value = "";
    if (!token) return;
    try {
      sessionStorage.setItem(TOKEN_KEY, token);
    } catch (_) {
      showNote(NO_STORAGE);
      return;
    }
    awaitingToken = false;
    section.hidden = true;
    document.body.dataset.auth = "token";
    setStatus("loading…", false);
    waiting.splice(0).forEach((resume) => resume());
  });

  window.rlLogin = { TOKEN_KEY, storedToken, setStatus, ask, awaiting: () => awaitingToken };
})();
