// The exercise page keeps what its submission form held when it is sent, in this tab's
// sessionStorage (never a cookie, never the server), and puts it back when the page comes back
// with ?kept=1: after a refusal, or after logging in again when the session had ended before the
// form was sent. A chosen file cannot be chosen again by a page: its name is said instead.
(function () {
  "use strict";
  var key = "hpcgrade-draft:" + location.pathname;
  var form = document.querySelector("form.submit-form");
  if (form) {
    form.addEventListener("submit", function () {
      var chosen = form.elements.file.files[0];
      try {
        sessionStorage.setItem(key, JSON.stringify({
          code: form.elements.code.value, file: chosen ? chosen.name : ""
        }));
      } catch (full) { /* over the browser's quota, or storage refused: nothing is kept */ }
    });
  }
  if (!/[?&]kept=/.test(location.search)) { return; }
  var draft = null;
  try { draft = JSON.parse(sessionStorage.getItem(key)); } catch (unreadable) { return; }
  if (!draft) { return; }
  var note = document.querySelector(".kept-note");
  var said = [];
  var area = document.querySelector("textarea.draft");
  if (draft.code && area && !area.value) {
    area.value = draft.code;
    area.closest("label").hidden = false;
    said.push(note.dataset.code);
  }
  if (draft.file) { said.push(note.dataset.file.replace("{name}", draft.file)); }
  if (said.length) {
    note.textContent = said.join(" ");
    note.hidden = false;
  }
  document.getElementById("submit").scrollIntoView();
})();
