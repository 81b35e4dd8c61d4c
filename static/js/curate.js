// Curate's own script: progressive enhancement only. Every action works
// without it; it adds confirmation before destructive form posts.
(function () {
  "use strict";
  // Forms whose button carries hx-confirm ask first even when htmx is not
  // handling the form (a plain post).
  document.addEventListener("submit", function (ev) {
    var btn = ev.submitter;
    if (!btn || !btn.hasAttribute("hx-confirm") || btn.closest("[hx-post],[hx-put],[hx-patch],[hx-delete]")) return;
    if (!window.confirm(btn.getAttribute("hx-confirm"))) ev.preventDefault();
  });
})();
