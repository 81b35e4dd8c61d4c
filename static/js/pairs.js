// The pair editor's conveniences. Every action is a real form that works
// without this script: "Swap" posts the form and the server answers with
// the replies exchanged. Here the swap happens in place (the feedback links
// and the diff's direction follow), and the strength slider shows its value
// as it moves.
(function () {
  "use strict";

  function swapValues(a, b) {
    var x = document.getElementById(a), y = document.getElementById(b);
    if (!x || !y) return;
    var t = x.value;
    x.value = y.value;
    y.value = t;
  }

  // Exchanging the two texts turns every insertion of the diff into a
  // deletion and back.
  function flipDiff() {
    var diff = document.getElementById("pair-diff");
    if (!diff) return;
    Array.prototype.slice.call(diff.querySelectorAll("ins, del")).forEach(function (el) {
      var other = document.createElement(el.tagName === "INS" ? "del" : "ins");
      other.textContent = el.textContent;
      el.replaceWith(other);
    });
  }

  document.addEventListener("click", function (ev) {
    var btn = ev.target.closest ? ev.target.closest("#swap") : null;
    if (!btn) return;
    ev.preventDefault();
    swapValues("chosen", "rejected");
    swapValues("chosen-feedback-id", "rejected-feedback-id");
    flipDiff();
    var form = document.getElementById("pair-form");
    if (form) form.dataset.swapped = form.dataset.swapped === "1" ? "0" : "1";
  });

  document.addEventListener("input", function (ev) {
    if (ev.target.id !== "strength") return;
    var out = document.getElementById("strength-value");
    if (out) out.textContent = ev.target.value;
  });
})();
