// The ranking page's query field: picking one of the suggested queries
// (a datalist the server fills as the curator types) loads its answers at
// once. Typing and pressing "Find answers" works without this script.
(function () {
  "use strict";

  document.addEventListener("input", function (ev) {
    var field = ev.target;
    if (field.id !== "rank-query") return;
    // A pick from the list arrives without an inputType (or as a
    // replacement); typing a suggestion's text out in full does not load.
    if (ev.inputType && ev.inputType !== "insertReplacementText") return;
    var list = document.getElementById("rank-queries");
    if (!list) return;
    var picked = Array.prototype.some.call(list.options, function (o) { return o.value === field.value; });
    if (picked && field.form) field.form.submit();
  });
})();
