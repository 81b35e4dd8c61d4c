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

  // A form marked data-show-refusal that htmx posts is answered, when
  // refused (409, 422), with itself and its messages: show it in place,
  // beside its button, instead of dropping it.
  document.addEventListener("htmx:beforeSwap", function (ev) {
    var status = ev.detail.xhr.status;
    var elt = ev.detail.requestConfig && ev.detail.requestConfig.elt;
    if ((status === 409 || status === 422) && elt && elt.closest && elt.closest("[data-show-refusal]")) {
      ev.detail.shouldSwap = true;
      ev.detail.isError = false;
    }
  });
})();
