// The loop form's pair methods follow its training method: supervised
// training takes the items themselves, so while it is chosen (with the
// dataset following the method) the methods are set aside, not sent, and
// cannot be refused. Without this script the server leaves them aside the
// same way.
(function () {
  "use strict";
  function init() {
    var form = document.getElementById("loop-form");
    var box = document.getElementById("loop-methods");
    if (!form || !box || !form.elements.method) return;
    var method = form.elements.method, type = form.elements.dataset_type;
    function sync() {
      var aside = method.value === "supervised" && (!type || type.value === "" || type.value === "instruction_tuning");
      Array.prototype.forEach.call(box.querySelectorAll("input[name=methods]"), function (input) { input.disabled = aside; });
      box.classList.toggle("muted", aside);
    }
    form.addEventListener("change", function (ev) {
      if (ev.target === method || ev.target === type) sync();
    });
    sync();
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
