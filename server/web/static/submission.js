// The submission page while it waits: polls the status every second and shows each state as it
// comes (queued with its place, running, graded) in the status tag itself, inside a live region
// that screen readers announce, with the server's note on why it waits; once grading ends, the
// page reloads to show the result.
(function () {
  "use strict";
  var box = document.getElementById("summary");
  if (!box || box.dataset.waiting !== "yes") { return; }
  var tag = document.querySelector("#live .tag");
  var place = document.getElementById("place");
  var note = document.getElementById("wait-note");
  var shown = tag.className + "|" + place.textContent;

  function label(state) {
    var key = "label" + state.charAt(0).toUpperCase() + state.slice(1);
    return box.dataset[key] || state;
  }

  function show(s) {
    var position = s.status === "queued" && s.queue_position
      ? " · " + box.dataset.labelPosition + ": " + s.queue_position : "";
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

  function poll() {
    fetch(box.dataset.statusUrl, {credentials: "same-origin", cache: "no-store",
                                  headers: {Accept: "application/json"}})
      .then(function (r) { if (!r.ok) { throw new Error("HTTP " + r.status); } return r.json(); })
      .then(function (s) {
        show(s);
        if (s.status === "queued" || s.status === "running") { setTimeout(poll, 1000); }
        else { setTimeout(function () { window.location.reload(); }, 1500); }
      })
      .catch(function () { setTimeout(poll, 3000); });
  }
  setTimeout(poll, 1000);
})();
