// The submission page while it waits: polls the status every second and says each state as it
// comes (queued with its place, running, graded) in a live region, with the server's note on
// why it waits; once grading ends, the page reloads to show the result.
(function () {
  "use strict";
  var box = document.getElementById("summary");
  if (!box || box.dataset.waiting !== "yes") { return; }
  var live = document.getElementById("live");
  var note = document.getElementById("wait-note");
  var said = live.textContent;

  function label(state) {
    var key = "label" + state.charAt(0).toUpperCase() + state.slice(1);
    return box.dataset[key] || state;
  }

  function show(s) {
    var text = label(s.status);
    if (s.status === "queued" && s.queue_position) {
      text += " · " + box.dataset.labelPosition + ": " + s.queue_position;
    }
    if (text !== said) { live.textContent = text; said = text; }
    note.textContent = s.note || "";  // text only: never markup from the server
    note.hidden = !s.note;
  }

  function poll() {
    fetch(box.dataset.statusUrl, {credentials: "same-origin", headers: {Accept: "application/json"}})
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
