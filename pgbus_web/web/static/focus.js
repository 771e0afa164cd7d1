// Keyboard focus and scroll kept across the page's own changes, on top of
// htmx. A file, not inline code: the Content-Security-Policy allows no
// inline script.
//
// 1. Merge, not replace: a fragment swapped in by id (hx-swap-oob: live
//    refresh, an action's answer) is merged into the element on the page
//    by idiomorph (vendor/idiomorph-ext.min.js), so an element that is
//    still there keeps its node, its focus and the page its scroll. A
//    replaced node would drop focus to the body.
// 2. After an action: focus moves to the first field in error, or else to
//    the messages area that says what happened.
// 3. Escape closes an open action form or the language menu, and focus
//    goes back to its button.
(function () {
  "use strict";

  document.addEventListener("htmx:oobBeforeSwap", function (event) {
    var detail = event.detail;
    var target = detail.target;
    var fragment = detail.fragment;
    var incoming = fragment && fragment.firstElementChild;
    // Only a whole element swapped for the one of the same id; innerHTML
    // swaps (the messages) stay htmx's own.
    if (!window.Idiomorph || !target || !incoming || fragment.childElementCount !== 1 || incoming.id !== target.id) {
      return;
    }
    detail.shouldSwap = false;
    window.Idiomorph.morph(target, incoming, { morphStyle: "outerHTML", restoreFocus: true });
    if (window.htmx) {
      window.htmx.process(target);
    }
  });

  function isActionForm(element) {
    return !!(element && element.matches && element.matches("form[data-pgbus-action]"));
  }

  // Watched from the request's start: the answer may take the form out of
  // the page (Resume gone once the run is resumed), and events on a
  // detached form reach no listener here.
  document.addEventListener("htmx:beforeRequest", function (event) {
    var form = event.detail.elt;
    var xhr = event.detail.xhr;
    if (!isActionForm(form) || !xhr) {
      return;
    }
    var formId = form.id;
    // loadend comes after htmx has swapped the answer in (on load); the
    // frame lets the merge settle.
    xhr.addEventListener("loadend", function () {
      window.requestAnimationFrame(function () {
        var current = (formId && document.getElementById(formId)) || null;
        var invalid = current && current.querySelector('[aria-invalid="true"]');
        if (invalid) {
          invalid.focus();
          return;
        }
        var messages = document.getElementById("pgbus-messages");
        if (messages && messages.textContent.trim()) {
          messages.focus();
        }
      });
    });
  });

  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape" || event.defaultPrevented) {
      return;
    }
    var open = document.querySelectorAll("details.pgbus-action[open], details.pgbus-lang-menu[open]");
    if (!open.length) {
      return;
    }
    // The one holding focus first, else every open one.
    var active = document.activeElement;
    var holder = active && active.closest ? active.closest("details.pgbus-action[open], details.pgbus-lang-menu[open]") : null;
    var closing = holder ? [holder] : Array.prototype.slice.call(open);
    closing.forEach(function (details) {
      details.removeAttribute("open");
    });
    var summary = closing[0].querySelector("summary");
    if (summary) {
      summary.focus();
    }
    event.preventDefault();
  });
})();
