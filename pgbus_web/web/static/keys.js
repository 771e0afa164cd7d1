// Keys for an incident, on every page: "/" to the search box, "g" then
// "a" to the needs-attention groups, "j" and "k" to the next and previous
// run of the list (Enter opens the one in focus: it is a link), "?" for
// the list of these keys (#pgbus-keys, drawn by the layout in the page's
// language). None fires while typing in a field, with a modifier held, or
// while another dialog is open. A file, not inline code: the
// Content-Security-Policy allows no inline script.
//
// The single keys can be turned off (WCAG 2.1.4: speech input types
// letters): the list's checkbox (#pgbus-keys-use) keeps the choice in
// localStorage for every page, honoured from the next key press. While
// off, no key does anything, "?" included; the top bar's button
// (#pgbus-keys-open, hidden until this script shows it) opens the list, so
// they can be turned on again.
(function () {
  "use strict";

  var afterG = false;
  var SWITCH_KEY = "pgbus-single-keys";

  function keysOff() {
    try {
      return window.localStorage.getItem(SWITCH_KEY) === "off";
    } catch (error) {
      return false;
    }
  }

  function showSwitch() {
    var box = document.getElementById("pgbus-keys-use");
    if (box) {
      box.checked = !keysOff();
    }
    var button = document.getElementById("pgbus-keys-open");
    if (button) {
      button.hidden = false;
    }
  }

  function typing(target) {
    return !!(target && target.closest &&
      target.closest("input, textarea, select, [contenteditable=''], [contenteditable='true']"));
  }

  function index() {
    var brand = document.querySelector(".pgbus-brand");
    return brand ? brand.getAttribute("href") : null;
  }

  function search() {
    var box = document.getElementById("pgbus-search-q");
    if (box) {
      box.focus();
      box.select();
    }
  }

  function attention() {
    var groups = document.getElementById("pgbus-attention");
    if (groups) {
      groups.focus();
      groups.scrollIntoView({ block: "start" });
    } else if (index()) {
      // Elsewhere the groups are the index's: go there, at them.
      window.location.assign(index() + "#pgbus-attention");
    }
  }

  function runLinks() {
    return Array.prototype.slice.call(document.querySelectorAll("#pgbus-runs tr.pgbus-run-row a.pgbus-class"));
  }

  function step(by) {
    var links = runLinks();
    if (!links.length) {
      return;
    }
    var active = document.activeElement;
    var row = active && active.closest ? active.closest("tr.pgbus-run-row") : null;
    var at = -1;
    for (var i = 0; i < links.length; i++) {
      if (links[i].closest("tr") === row) {
        at = i;
      }
    }
    var next = at < 0 ? (by > 0 ? 0 : links.length - 1) : Math.min(Math.max(at + by, 0), links.length - 1);
    links[next].focus();
    links[next].scrollIntoView({ block: "nearest" });
  }

  function help() {
    var keys = document.getElementById("pgbus-keys");
    if (keys && !keys.open) {
      showSwitch();
      keys.showModal();
    }
  }

  document.addEventListener("click", function (event) {
    if (event.target.closest && event.target.closest("#pgbus-keys-open")) {
      help();
    }
  });

  document.addEventListener("change", function (event) {
    var box = event.target;
    if (!box || box.id !== "pgbus-keys-use") {
      return;
    }
    try {
      window.localStorage.setItem(SWITCH_KEY, box.checked ? "on" : "off");
    } catch (error) {
      box.checked = true;
    }
    afterG = false;
  });

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", showSwitch);
  } else {
    showSwitch();
  }

  document.addEventListener("keydown", function (event) {
    if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey || event.isComposing ||
        keysOff() || typing(event.target) || document.querySelector("dialog[open]")) {
      afterG = false;
      return;
    }
    var key = event.key;
    if (afterG) {
      afterG = false;
      if (key === "a") {
        event.preventDefault();
        attention();
      }
      return;
    }
    var act = { "/": search, "j": function () { step(1); }, "k": function () { step(-1); }, "?": help }[key];
    if (key === "g") {
      afterG = true;
    } else if (act) {
      event.preventDefault();
      act();
    }
  });
})();
