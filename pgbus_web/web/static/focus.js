// Keyboard focus and scroll kept across the page's own changes, on top of
// htmx. A file, not inline code: the Content-Security-Policy allows no
// inline script.
//
// 1. Merge, not replace: a fragment swapped in by id (hx-swap-oob: live
//    refresh, an action's answer) is merged into the element on the page
//    by idiomorph (vendor/idiomorph-ext.min.js), so an element that is
//    still there keeps its node, its focus and the page its scroll. A
//    replaced node would drop focus to the body. The whitespace between a
//    table's rows is dropped from both sides first: idiomorph pairs a text
//    node with any text node, so one row more at the top paired each row's
//    following whitespace one row off and took every row above the focused
//    one out of the table and back in (a table section draws no text).
// 2. After an action: focus moves to the first field in error, or else to
//    the messages area that says what happened.
// 3. Escape closes an open action form or the language menu, and focus
//    goes back to its button.
// 4. An operation's preview swapped into #pgbus-operation-slot is a modal
//    dialog (showModal): a backdrop, the page beneath inert, focus kept
//    inside, Escape closes it. It is drawn open for the page without
//    JavaScript (preview.html), so here it is reopened as modal. Its back
//    link closes it instead of loading the list again; closed, it leaves
//    the page and focus goes back to the button that asked for it.
// 5. A page drawn with an element marked data-pgbus-focus (an operation's
//    page reached from its start) opens with focus there, not on the body.
// 6. A table's frame scrolls sideways only when its table is wider than it
//    (below).
// 7. The operator's place: while focus (or the pointer) is on a run of the
//    list, a refresh that would put runs above it or take it off the page
//    waits. The list stays as it is and a bar over its head says new runs
//    are waiting; the operator opens them with its button, as in a mail
//    client. A refresh that leaves the rows above that run as they are is
//    merged at once (its own row's changes included).
(function () {
  "use strict";

  function focusMarked() {
    var marked = document.querySelector("[data-pgbus-focus]");
    if (marked && document.activeElement === document.body) {
      marked.focus({ preventScroll: true });
    }
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", focusMarked);
  } else {
    focusMarked();
  }

  function dropRowWhitespace(root) {
    var sections = root.querySelectorAll("thead, tbody, tfoot");
    for (var i = 0; i < sections.length; i++) {
      var node = sections[i].firstChild;
      while (node) {
        var next = node.nextSibling;
        if (node.nodeType === Node.TEXT_NODE && !node.nodeValue.trim()) {
          node.parentNode.removeChild(node);
        }
        node = next;
      }
    }
  }

  // 6. A table's frame (.pgbus-table-wrap) scrolls sideways only while its
  //    table is wider than it. Chromium measures a layout shift against the
  //    nearest scroll container: a row coming in above the screen moved the
  //    rows below it within the frame, a shift although the page's scroll
  //    anchoring kept them still on screen. A frame the table fits in is
  //    no scroll container (pgbus-fits), so the page's own scroll is theirs.
  //    Without JavaScript the frame always scrolls, as no poll comes.
  //    A frame with a height limit (the insights tables) holds a table
  //    taller than it: fitting means fitting both ways, or the table
  //    would spill out of its box over what follows.
  var frames = window.ResizeObserver && new window.ResizeObserver(function (entries) {
    for (var i = 0; i < entries.length; i++) {
      var frame = entries[i].target.closest(".pgbus-table-wrap");
      if (frame) {
        fitTableFrame(frame);
      }
    }
  });

  function fitTableFrame(frame) {
    var table = frame.querySelector("table");
    frame.classList.toggle("pgbus-fits", !!table && table.offsetWidth <= frame.clientWidth
      && table.offsetHeight <= frame.clientHeight);
  }

  function watchTableFrames(root) {
    if (!frames) {
      return;
    }
    var found = root.querySelectorAll(".pgbus-table-wrap");
    for (var i = 0; i < found.length; i++) {
      var table = found[i].querySelector("table");
      fitTableFrame(found[i]);
      frames.observe(found[i]);
      if (table) {
        frames.observe(table);
      }
    }
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () { watchTableFrames(document); });
  } else {
    watchTableFrames(document);
  }

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
    if (target.id === RUNS && wouldMove(target, incoming)) {
      held = incoming;
      heldFor = operatorsRun(target);
      showWaiting(target, incoming);
      return;
    }
    if (target.id === RUNS) {
      held = null;
    }
    merge(target, incoming);
  });

  function merge(target, incoming) {
    dropRowWhitespace(target);
    dropRowWhitespace(incoming);
    window.Idiomorph.morph(target, incoming, { morphStyle: "outerHTML", restoreFocus: true });
    // The merge takes away the class the server never sends; put back
    // before the frame is drawn.
    watchTableFrames(target);
    if (window.htmx) {
      window.htmx.process(target);
    }
  }

  // 7. The run the operator is on, and what a refresh would do to it.
  var RUNS = "pgbus-runs";
  var held = null;
  var heldFor = null;

  function runIds(block) {
    return Array.prototype.map.call(block.querySelectorAll("tr.pgbus-run-row"), function (row) {
      return row.getAttribute("data-workflow-id");
    });
  }

  function operatorsRun(block) {
    var active = document.activeElement;
    var row = active && active !== document.body && block.contains(active) && active.closest
      ? active.closest("tr.pgbus-run-row") : null;
    if (!row) {
      var hovered = block.querySelectorAll("tr.pgbus-run-row:hover");
      row = hovered.length ? hovered[hovered.length - 1] : null;
    }
    return row ? row.getAttribute("data-workflow-id") : null;
  }

  function wouldMove(target, incoming) {
    var id = operatorsRun(target);
    if (!id) {
      return false;
    }
    var before = runIds(target);
    var after = runIds(incoming);
    var at = after.indexOf(id);
    return at < 0 || after.slice(0, at).join(" ") !== before.slice(0, before.indexOf(id)).join(" ");
  }

  function showWaiting(target, incoming) {
    var bar = target.querySelector("#pgbus-new-runs");
    if (!bar) {
      return;
    }
    var shown = runIds(target);
    var fresh = runIds(incoming).filter(function (id) { return shown.indexOf(id) < 0; });
    var count = bar.querySelector(".pgbus-new-runs-count");
    if (count) {
      count.textContent = fresh.length ? String(fresh.length) : "";
    }
    bar.hidden = false;
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("#pgbus-new-runs button");
    var target = document.getElementById(RUNS);
    if (!button || !target || !held) {
      return;
    }
    var incoming = held;
    held = null;
    merge(target, incoming);
    // Focus on the run the operator was on, or, when it is on another page
    // now, on the list's first run: never left on the hidden button.
    var rows = target.querySelectorAll("tr.pgbus-run-row");
    var row = null;
    for (var i = 0; i < rows.length; i++) {
      if (rows[i].getAttribute("data-workflow-id") === heldFor) {
        row = rows[i];
      }
    }
    var link = (row || rows[0] || target).querySelector("a");
    if (link) {
      link.focus();
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

  var SLOT = "#pgbus-operation-slot";
  var opener = null;

  document.addEventListener("htmx:beforeRequest", function (event) {
    var form = event.detail.elt;
    if (!form || !form.getAttribute || form.getAttribute("hx-target") !== SLOT) {
      return;
    }
    var active = document.activeElement;
    opener = active && form.contains(active) && active.matches("button") ? active : form.querySelector("button");
  });

  function giveFocusBack() {
    // Live refresh waits while the dialog is open, so the button is still
    // the same node; one gone meanwhile leaves focus where the browser puts it.
    if (opener && opener.isConnected) {
      opener.focus();
    }
  }

  function openModal(dialog) {
    if (dialog.matches(":modal") || typeof dialog.showModal !== "function") {
      return;
    }
    // showModal refuses a dialog already open (drawn with the attribute).
    dialog.close();
    dialog.showModal();
    dialog.addEventListener("close", function () {
      // The close() above queues a close event of its own, which comes
      // when the dialog is open again; replaced by its own form's answer
      // (a refusal), the new one opens instead.
      if (dialog.open || !dialog.isConnected) {
        return;
      }
      dialog.remove();
      giveFocusBack();
    });
  }

  // afterSwap comes before htmx settles the new content and focuses its
  // autofocus field: modal by then, that focus scrolls nothing beneath.
  document.addEventListener("htmx:afterSwap", function () {
    var dialog = document.querySelector(SLOT + " dialog.pgbus-operation-dialog");
    if (dialog) {
      openModal(dialog);
    }
  });

  document.addEventListener("click", function (event) {
    var back = event.target.closest && event.target.closest("dialog.pgbus-operation-dialog a.pgbus-button");
    var dialog = back && back.closest("dialog");
    if (!dialog || !dialog.matches(":modal")) {
      return;
    }
    event.preventDefault();
    dialog.close();
  });
})();
