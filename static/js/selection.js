// Selection bars: a list's checkboxes (data-selects="FORM") belong to a
// form (data-selection-bar) that acts on the ticked rows. Without this
// script the bar is always shown and works the same; here it appears once
// something is ticked, counts the selection, and a header checkbox
// (data-select-all="FORM") ticks every row of the page.
(function () {
  "use strict";

  function boxes(formID) {
    return Array.prototype.slice.call(document.querySelectorAll('input[data-selects="' + formID + '"]'));
  }

  function update(bar) {
    var ticked = boxes(bar.id).filter(function (b) { return b.checked; }).length;
    bar.hidden = ticked === 0;
    var count = bar.querySelector("[data-selection-count]");
    if (count) count.textContent = ticked === 1 ? "1 selected" : ticked + " selected";
    var all = document.querySelector('[data-select-all="' + bar.id + '"]');
    if (all) all.checked = ticked > 0 && ticked === boxes(bar.id).length;
    boxes(bar.id).forEach(function (b) {
      var row = b.closest("tr");
      if (row) row.classList.toggle("selected", b.checked);
    });
  }

  function bars() {
    return Array.prototype.slice.call(document.querySelectorAll("[data-selection-bar]"));
  }

  document.addEventListener("change", function (ev) {
    var el = ev.target;
    var formID = el.getAttribute && (el.getAttribute("data-selects") || el.getAttribute("data-select-all"));
    if (!formID) return;
    if (el.hasAttribute("data-select-all")) {
      boxes(formID).forEach(function (b) { b.checked = el.checked; });
    }
    var bar = document.getElementById(formID);
    if (bar) update(bar);
  });

  function init() { bars().forEach(update); }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
