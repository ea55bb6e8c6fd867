// The overview's live part: fetch the server-rendered fragment again a few seconds after the
// last answer (polling, never two at once; no library, no build step). The fragment is HTML
// the server escaped.
(function () {
  var live = document.getElementById("live");
  if (!live) { return; }
  var seconds = parseInt(live.getAttribute("data-seconds"), 10) || 5;
  function later() { setTimeout(refresh, seconds * 1000); }
  function refresh() {
    fetch(live.getAttribute("data-src"), { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        live.innerHTML = html;
        live.setAttribute("data-updated", String(Date.now()));
        live.removeAttribute("data-stale");
      })
      .catch(function () { live.setAttribute("data-stale", "true"); })
      .then(later);
  }
  later();
})();
