// The experiment pages' forms under htmx: a refused form (422, or 409 for a
// move its state does not allow) comes back re-rendered with a message
// beside each field, so it is swapped into place like a success instead of
// being dropped. Without JavaScript the same forms post and re-render whole.
(function () {
  "use strict";
  document.addEventListener("htmx:beforeSwap", function (ev) {
    var status = ev.detail.xhr.status;
    var elt = ev.detail.requestConfig && ev.detail.requestConfig.elt;
    if ((status === 422 || status === 409) && elt && elt.closest("[data-refusals=swap]")) {
      ev.detail.shouldSwap = true;
      ev.detail.isError = false;
    }
  });
})();
