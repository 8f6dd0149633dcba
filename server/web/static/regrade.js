// A regrade's preview page while its submissions are graded: loaded again every few seconds,
// so that the progress and the table of old and new grades fill in without a click.
(function () {
  "use strict";
  var state = document.getElementById("regrade");
  if (state && state.dataset.grading === "yes") {
    setTimeout(function () { window.location.reload(); }, 5000);
  }
})();
