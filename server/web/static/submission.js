// The submission page while it waits: asks the status, naming the status it shows, and the
// server holds the request until the submission leaves it (server/web/live.py), so each state
// shows the moment it is stored: queued with its place and estimate, running, then the result,
// for which the page reloads at once. The status tag sits in a live region that screen readers
// announce, with the server's note on why it waits. A server that cannot hold answers at once;
// the page then asks again a second later.
(function () {
  "use strict";
  var box = document.getElementById("summary");
  if (!box || box.dataset.waiting !== "yes") { return; }
  var tag = document.querySelector("#live .tag");
  var place = document.getElementById("place");
  var note = document.getElementById("wait-note");
  var status = box.dataset.status;
  var shown = tag.className + "|" + place.textContent;
  var HELD_AT_LEAST = 500;  // ms: an answer sooner than this, unchanged, was not held

  function label(state) {
    var key = "label" + state.charAt(0).toUpperCase() + state.slice(1);
    return box.dataset[key] || state;
  }

  function show(s) {
    var position = s.status === "queued" && s.queue_position
      ? " · " + box.dataset.labelPosition + ": " + s.queue_position
        + (s.estimate ? " · " + s.estimate : "") : "";
    var now = "tag " + s.status + "|" + position;
    if (now !== shown) {  // written only when it changes: a screen reader hears each state once
      tag.className = "tag " + s.status;
      tag.textContent = label(s.status);
      place.textContent = position;
      shown = now;
    }
    note.textContent = s.note || "";  // text only: never markup from the server
    note.hidden = !s.note;
  }

  function ask() {
    var asked = Date.now();
    fetch(box.dataset.statusUrl + "?after=" + encodeURIComponent(status),
          {credentials: "same-origin", cache: "no-store", headers: {Accept: "application/json"}})
      .then(function (r) { if (!r.ok) { throw new Error("HTTP " + r.status); } return r.json(); })
      .then(function (s) {
        if (s.status !== "queued" && s.status !== "running") {
          window.location.reload();  // the result, as the page shows it
          return;
        }
        var held = s.status !== status || Date.now() - asked >= HELD_AT_LEAST;
        status = s.status;
        show(s);
        setTimeout(ask, held ? 0 : 1000);
      })
      .catch(function () { setTimeout(ask, 3000); });
  }
  ask();
})();
