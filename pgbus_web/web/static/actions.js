// The action areas in the browser, on top of htmx. A file, not inline
// code: the Content-Security-Policy allows no inline script.
//
// 1. A refusal keeps its status (400, 403, 404, 409, 413, 422) and, when
//    the pages drew it to be shown (the fresh fragments and the message
//    saying why), carries the X-Pgbus-Refusal header; htmx leaves error
//    answers unswapped by default, so swap exactly those. The server says
//    how (HX-Reswap: none keeps an operation's dialog as typed).
// 2. Live refresh (the #pgbus-refresh poller) waits while the operator is
//    busy: a form of the action area unfolded, focus in a form's field,
//    or the tab hidden. The next poll after that catches up.
// 3. A poll asks for the address bar's URL, not the one the page was drawn
//    with: the filter form and the pager change the list through htmx and
//    push their URL, and a poll must keep that list. It names the fragments
//    it wants in HX-Target (the server reads only those): the "often" ones
//    on every poll, the "seldom" ones (the slow needs-attention groups)
//    every n-th.
// 4. The live refresh switch (_live_toggle.html): a button, hidden until
//    this script shows it (without JavaScript nothing refreshes), that
//    turns the polls off and on; the choice is remembered in
//    localStorage for every page of the dashboard.
// 5. An element that swaps more than its htmx target (the filter form:
//    the runs and the range links beside it, hx-select-oob) names them all
//    in data-pgbus-targets; its request says so in HX-Target, where htmx
//    would name the target alone, so the server draws them all.
(function () {
  "use strict";

  var REFUSAL_HEADER = "X-Pgbus-Refusal";

  document.addEventListener("htmx:beforeSwap", function (event) {
    var detail = event.detail;
    if (detail.xhr.status >= 400 && detail.xhr.getResponseHeader(REFUSAL_HEADER)) {
      detail.shouldSwap = true;
      detail.isError = false;
    }
  });

  var LIVE_KEY = "pgbus-live-refresh";

  function liveOff() {
    try {
      return window.localStorage.getItem(LIVE_KEY) === "off";
    } catch (error) {
      return false;
    }
  }

  function showSwitch() {
    var button = document.getElementById("pgbus-live-toggle");
    if (!button) {
      return;
    }
    var on = !liveOff();
    button.hidden = false;
    button.setAttribute("aria-pressed", on ? "true" : "false");
    var state = button.querySelector(".pgbus-live-state");
    if (state) {
      state.textContent = button.getAttribute(on ? "data-on" : "data-off");
    }
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("#pgbus-live-toggle");
    if (!button) {
      return;
    }
    try {
      window.localStorage.setItem(LIVE_KEY, liveOff() ? "on" : "off");
    } catch (error) {
      return;
    }
    showSwitch();
  });

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", showSwitch);
  } else {
    showSwitch();
  }

  function busy() {
    if (liveOff() || document.hidden) {
      return true;
    }
    if (document.querySelector("details.pgbus-action[open], dialog.pgbus-operation-dialog[open]")) {
      return true;
    }
    var active = document.activeElement;
    return !!(active && active.closest && active.closest("form") && active.matches("input, select, textarea"));
  }

  var polls = 0;

  function pollPath(poller) {
    var drawn = new URL(poller.getAttribute("hx-get"), location.href);
    // Same page: keep the filters and the page the address bar has now. A
    // page drawn by a plain form post (its address is the action's) polls
    // the page it was drawn for.
    return drawn.pathname === location.pathname ? location.pathname + location.search : null;
  }

  function pollTargets(poller) {
    var often = poller.getAttribute("data-pgbus-often") || "";
    var seldom = poller.getAttribute("data-pgbus-seldom") || "";
    var every = parseInt(poller.getAttribute("data-pgbus-seldom-every"), 10) || 1;
    var wanted = often ? [often] : [];
    if (seldom && polls % every === 0) {
      wanted.push(seldom);
    }
    return wanted.join(",");
  }

  document.addEventListener("htmx:configRequest", function (event) {
    var detail = event.detail;
    var targets = detail.elt && detail.elt.getAttribute && detail.elt.getAttribute("data-pgbus-targets");
    if (targets) {
      detail.headers["HX-Target"] = targets;
    }
  });

  // configRequest comes before beforeRequest: a poll skipped here is not
  // counted, so the seldom fragments still come every n-th poll made.
  document.addEventListener("htmx:configRequest", function (event) {
    var detail = event.detail;
    var poller = detail.elt;
    if (!poller || poller.id !== "pgbus-refresh") {
      return;
    }
    if (busy()) {
      event.preventDefault();
      return;
    }
    polls += 1;
    var path = pollPath(poller);
    if (path) {
      detail.path = path;
    }
    var targets = pollTargets(poller);
    if (targets) {
      detail.headers["HX-Target"] = targets;
    }
  });
})();
