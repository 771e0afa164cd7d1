// The operator's time zone, told to the server: the browser's IANA zone
// goes into the pgbus_tz cookie, which pgbus_web.i18n.current_timezone()
// reads (and checks against the zone database) for every time on the
// pages. Without it, or without JavaScript, times are shown in UTC, always
// with the zone written out. A file, not an inline script: the
// Content-Security-Policy allows no inline code.
//
// The first visit has no cookie yet, so its page was drawn in UTC: once the
// cookie is set, a page fetched with GET (data-pgbus-tz-fix) whose zone
// (data-pgbus-tz) is not the browser's reloads, once per zone and tab
// (sessionStorage), so it shows the operator's own clock. A browser that
// refuses the cookie keeps UTC, named on the page, and never loops.
(function () {
  "use strict";
  var zone;
  try {
    zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  } catch (error) {
    return;
  }
  // Zone names are letters, digits, "_", "+", "-" and "/": nothing that
  // needs quoting in a cookie.
  if (!zone || !/^[A-Za-z0-9_+\-\/]{1,64}$/.test(zone)) {
    return;
  }
  function cookie() {
    return document.cookie.split("; ").filter(function (part) {
      return part.indexOf("pgbus_tz=") === 0;
    })[0];
  }
  var root = document.documentElement;
  var current = cookie();
  if (current === "pgbus_tz=" + zone) {
    fixFirstLoad();
    return;
  }
  var secure = window.location.protocol === "https:" ? "; secure" : "";
  // The dashboard's own prefix (the page says it), not the whole host site.
  var path = document.documentElement.getAttribute("data-pgbus-cookie-path") || "/";
  if (!/^\/[A-Za-z0-9_.~\-\/]*$/.test(path)) {
    path = "/";
  }
  document.cookie = "pgbus_tz=" + zone + "; path=" + path + "; max-age=31536000; samesite=lax" + secure;
  fixFirstLoad();

  function fixFirstLoad() {
    if (!root.hasAttribute("data-pgbus-tz-fix") || root.getAttribute("data-pgbus-tz") === zone) {
      return;
    }
    if (cookie() !== "pgbus_tz=" + zone) {
      return;  // cookies refused: a reload would draw UTC again
    }
    try {
      if (window.sessionStorage.getItem("pgbus-tz-reloaded") === zone) {
        return;
      }
      window.sessionStorage.setItem("pgbus-tz-reloaded", zone);
    } catch (error) {
      return;
    }
    window.location.reload();
  }
})();
