// Caldera portal: live refresh of each page's #live region and log follow.
// No framework, no network beyond this server. Every page works without it;
// it only saves the reload.
(function () {
  "use strict";

  function withParam(url, key, value) {
    var u = new URL(url, window.location.href);
    u.searchParams.set(key, value);
    return u.toString();
  }

  // #live: fetched again from the same URL with fragment=live and swapped in.
  function refreshLive() {
    var live = document.getElementById("live");
    if (!live) return;
    var every = parseInt(live.getAttribute("data-refresh"), 10) || 5000;
    function tick() {
      // An open confirmation or a focused field inside keeps what the user is doing.
      var busy = live.querySelector("details[open]") ||
        (document.activeElement && live.contains(document.activeElement) &&
         document.activeElement.tagName !== "BODY" && document.activeElement.tagName !== "A");
      if (document.hidden || busy) return;
      fetch(withParam(window.location.href, "fragment", "live"), { credentials: "same-origin" })
        .then(function (r) {
          if (r.status === 401) { window.location.href = "/login"; return null; }
          return r.ok ? r.text() : null;
        })
        .then(function (html) {
          if (html !== null && html !== undefined) {
            live.innerHTML = html;
            live.setAttribute("data-refreshed", String(Date.now()));
          }
        })
        .catch(function () { /* the next tick tries again */ });
    }
    window.setInterval(tick, every);
  }

  // #log with data-follow: while #log-follow is checked, the next bytes of
  // the log are asked for from the last end offset and appended.
  function followLog() {
    var log = document.getElementById("log");
    var box = document.getElementById("log-follow");
    if (!log || !box) return;
    function tick() {
      if (!box.checked || document.hidden) return;
      var from = log.getAttribute("data-end") || "0";
      fetch(withParam(log.getAttribute("data-follow"), "from_byte", from), { credentials: "same-origin" })
        .then(function (r) {
          if (r.status === 401) { window.location.href = "/login"; return null; }
          if (!r.ok) return null;
          var end = r.headers.get("X-Log-End");
          if (end) log.setAttribute("data-end", end);
          return r.text();
        })
        .then(function (text) {
          if (text) {
            log.textContent += text;
            log.scrollTop = log.scrollHeight;
          }
        })
        .catch(function () {});
    }
    window.setInterval(tick, 2000);
  }

  document.addEventListener("DOMContentLoaded", function () {
    refreshLive();
    followLog();
  });
})();
