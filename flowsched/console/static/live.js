// The overview's live part: fetch the server-rendered fragment again every few seconds
// (polling; no build step, no library). The fragment is HTML the server escaped.
(function () {
  var live = document.getElementById("live");
  if (!live) { return; }
  var seconds = parseInt(live.getAttribute("data-seconds"), 10) || 5;
  function refresh() {
    fetch(live.getAttribute("data-src"), { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) { live.innerHTML = html; live.setAttribute("data-updated", Date.now()); })
      .catch(function () { live.setAttribute("data-stale", "true"); });
  }
  setInterval(refresh, seconds * 1000);
})();
