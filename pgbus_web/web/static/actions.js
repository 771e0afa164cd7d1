// The action areas in the browser, on top of htmx. A file, not inline
// code: the Content-Security-Policy allows no inline script.
//
// 1. A refused action (400, 403, 404, 409, 413, 422) still carries the
//    fresh fragments and the message saying why; htmx leaves error
//    answers unswapped by default, so swap those of the action forms.
// 2. Live refresh (the #pgbus-refresh poller) waits while the operator is
//    busy: a form of the action area unfolded, focus in a form's field,
//    or the tab hidden. The next poll after that catches up.
(function () {
  "use strict";

  var ANSWERED = [400, 403, 404, 409, 413, 422];

  function isActionForm(element) {
    return !!(element && element.closest && element.closest("[data-pgbus-action]"));
  }

  document.addEventListener("htmx:beforeSwap", function (event) {
    var detail = event.detail;
    var source = (detail.requestConfig && detail.requestConfig.elt) || detail.elt || event.target;
    if (ANSWERED.indexOf(detail.xhr.status) !== -1 && isActionForm(source)) {
      detail.shouldSwap = true;
      detail.isError = false;
    }
  });

  function busy() {
    if (document.hidden) {
      return true;
    }
    if (document.querySelector("details.pgbus-action[open]")) {
      return true;
    }
    var active = document.activeElement;
    return !!(active && active.closest && active.closest("form") && active.matches("input, select, textarea"));
  }

  document.addEventListener("htmx:beforeRequest", function (event) {
    var source = event.detail.elt;
    if (source && source.id === "pgbus-refresh" && busy()) {
      event.preventDefault();
    }
  });
})();
