// The hand-grading page (server/web/handgrading.py): keys to move between submissions and to
// reach the score form, and the saved comments' "Use" buttons. A file of its own: the
// Content-Security-Policy allows no inline script.
(function () {
  "use strict";
  if (!document.getElementById("hand-grading")) {
    return;
  }
  var comment = document.getElementById("override-comment");

  function typing(element) {
    return element.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(element.tagName);
  }

  function follow(id) {
    var link = document.getElementById(id);
    if (link) {
      window.location.assign(link.href);
    }
  }

  function focusField(field) {
    if (field) {
      field.focus();
      field.select();
    }
  }

  var keys = {
    n: function () { follow("next-submission"); },
    j: function () { follow("next-submission"); },
    p: function () { follow("previous-submission"); },
    k: function () { follow("previous-submission"); },
    s: function () { focusField(document.querySelector("#adjust-score input[name=score]")); },
    c: function () { focusField(comment); }
  };

  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape" && typing(event.target)) {
      event.target.blur();  // the keys work again
      return;
    }
    if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey
        || typing(event.target) || !Object.prototype.hasOwnProperty.call(keys, event.key)) {
      return;
    }
    event.preventDefault();
    keys[event.key]();
  });

  // a saved comment goes into the comment field: the field's own text, if any, stays before it
  Array.prototype.forEach.call(document.querySelectorAll("button.use-comment"), function (button) {
    button.hidden = false;
    button.addEventListener("click", function () {
      if (!comment) {
        return;
      }
      var before = comment.value.replace(/\s+$/, "");
      comment.value = before ? before + "\n" + button.dataset.text : button.dataset.text;
      comment.focus();
    });
  });
})();
