// The launch form shows the help and settings of the chosen method only,
// and its base model follows its defaults: while the field
// holds the default of the version and provider chosen before (or is
// empty), choosing another version or provider puts in the new one's —
// the dataset's base model, or else the provider's default — so the
// estimate stays complete. A model typed by hand is left alone. Without
// this script the field keeps what it holds, and an empty one trains the
// same default.
(function () {
  "use strict";
  function init() {
    var form = document.getElementById("ft-form");
    if (!form) return;
    var model = form.elements.base_model, version = form.elements.dataset_version_id, provider = form.elements.provider;
    if (!model || !version || !provider) return;
    function fallback() {
      var v = version.selectedOptions[0], p = provider.selectedOptions[0];
      return (v && v.getAttribute("data-base-model")) || (p && p.getAttribute("data-default-model")) || "";
    }
    var last = fallback();
    // What applies to some methods only (GRPO's help, IRS's settings) is
    // shown while one of them is chosen.
    var method = form.elements.method;
    function byMethod() {
      if (!method) return;
      Array.prototype.forEach.call(form.querySelectorAll("[data-methods]"), function (el) {
        el.hidden = el.getAttribute("data-methods").split(" ").indexOf(method.value) < 0;
      });
    }
    if (method) method.addEventListener("change", byMethod);
    // Capturing, so the field changes before htmx sends the form for its
    // estimate.
    form.addEventListener("change", function (ev) {
      if (ev.target !== version && ev.target !== provider) return;
      var next = fallback();
      if (model.value === "" || model.value === last) model.value = next;
      last = next;
    }, true);
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
