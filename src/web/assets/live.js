// Live updates of a workflow-operator web view page, without reloading it.
//
// The page names its server-sent events stream in <body data-live>. On each `changed` event
// (and when the stream (re)connects, to catch what changed while it was closed) the page is
// fetched again and each of its parts marked `data-live-part` is replaced by the fresh one with
// the same id; the tab's title follows. Fetches are spaced by at least 250 ms and never overlap.
(function () {
  "use strict";
  var url = document.body.getAttribute("data-live");
  if (!url || !window.EventSource || !window.fetch || !window.DOMParser) {
    return;
  }
  var busy = false;
  var again = false;

  function refresh() {
    if (busy) {
      again = true;
      return;
    }
    busy = true;
    fetch(window.location.href, { headers: { Accept: "text/html" }, cache: "no-store" })
      .then(function (response) {
        return response.ok ? response.text() : null;
      })
      .then(function (html) {
        if (html === null) {
          return;
        }
        var fresh = new DOMParser().parseFromString(html, "text/html");
        var parts = document.querySelectorAll("[data-live-part]");
        for (var i = 0; i < parts.length; i++) {
          var next = fresh.getElementById(parts[i].id);
          if (next) {
            parts[i].replaceWith(document.importNode(next, true));
          }
        }
        document.title = fresh.title;
        var count = Number(document.body.getAttribute("data-refreshed") || "0") + 1;
        document.body.setAttribute("data-refreshed", String(count));
      })
      .catch(function () {})
      .then(function () {
        setTimeout(function () {
          busy = false;
          if (again) {
            again = false;
            refresh();
          }
        }, 250);
      });
  }

  var source = new EventSource(url);
  source.addEventListener("open", refresh);
  source.addEventListener("changed", refresh);
})();
