// Copy buttons: a <button data-copy="#selector"> copies the text of the
// element it names and says so on the button for a moment. Buttons that
// arrive later (an HTMX swap) work too, as the listener is on the document.
(function () {
  "use strict";
  document.addEventListener("click", function (ev) {
    var btn = ev.target.closest && ev.target.closest("button[data-copy]");
    if (!btn) return;
    var src = document.querySelector(btn.getAttribute("data-copy"));
    if (!src) return;
    var text = src.textContent.trim();
    var label = btn.getAttribute("data-label") || btn.textContent;
    btn.setAttribute("data-label", label);
    function done(msg) {
      btn.textContent = msg;
      setTimeout(function () { btn.textContent = label; }, 2000);
    }
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(function () { done("Copied"); }, function () { select(src); done("Press Ctrl+C to copy"); });
    } else {
      select(src);
      done("Press Ctrl+C to copy");
    }
  });

  // select leaves the text selected, for copying by hand where the
  // clipboard is not open to scripts (plain http).
  function select(el) {
    var range = document.createRange();
    range.selectNodeContents(el);
    var sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
  }
})();
