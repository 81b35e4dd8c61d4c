// The evaluation form's reward formula, edited as rows of a scorer and its
// weight. Without this script the rows are plain fields with blank ones to
// fill and a button that asks the server for another; with it, rows are
// added and removed in place, the formula is written out as it is typed,
// and a weighted scorer is ticked among the scorers.
(function () {
  "use strict";
  var MAX_ROWS = 20;

  // The number as the formula writes it: at most four decimals, no
  // trailing zeros.
  function num(x) {
    var s = Math.abs(x).toFixed(4).replace(/0+$/, "").replace(/\.$/, "");
    return s === "" ? "0" : s;
  }

  // written is the formula of the filled rows, as the server writes it:
  // "R = 0.8·judge − 0.15·risk".
  function written(rows) {
    var out = "R =";
    var n = 0;
    rows.forEach(function (row) {
      var name = row.querySelector("select").value;
      var text = row.querySelector("input").value.trim();
      var w = Number(text);
      if (!name || text === "" || !isFinite(w)) return;
      if (w < 0) out += n === 0 ? " −" : " − ";
      else out += n === 0 ? " " : " + ";
      out += num(w) + "·" + name;
      n++;
    });
    return n === 0 ? "" : out;
  }

  function setUp(box) {
    var list = box.querySelector(".formula-rows");
    var add = box.querySelector("#formula-add");
    var out = box.querySelector("#formula-written");
    var form = box.closest("form");
    if (!list || !add || !out || !form) return;
    var blank = list.querySelector("[data-formula-row]:last-child").cloneNode(true);
    blank.querySelector("select").value = "";
    blank.querySelector("input").value = "";
    blank.querySelector(".formula-error").textContent = "";

    function rows() { return Array.prototype.slice.call(list.querySelectorAll("[data-formula-row]")); }
    function update() {
      var text = written(rows());
      out.textContent = text || "the default formula";
      add.disabled = rows().length >= MAX_ROWS;
    }
    function wire(row) {
      var remove = row.querySelector(".formula-remove");
      remove.hidden = false;
      remove.addEventListener("click", function () {
        if (rows().length > 1) row.remove();
        else {
          row.querySelector("select").value = "";
          row.querySelector("input").value = "";
        }
        update();
      });
    }
    rows().forEach(wire);
    add.addEventListener("click", function (ev) {
      ev.preventDefault();
      if (rows().length >= MAX_ROWS) return;
      var row = blank.cloneNode(true);
      row.querySelector(".formula-error").id = "";
      row.querySelector("select").removeAttribute("aria-describedby");
      list.appendChild(row);
      wire(row);
      row.querySelector("select").focus();
      update();
    });
    list.addEventListener("input", update);
    list.addEventListener("change", function (ev) {
      // A weighted scorer is scored: tick it among the scorers.
      if (ev.target.tagName === "SELECT" && ev.target.value) {
        var box = form.querySelector('input[name="scorers"][value="' + ev.target.value + '"]');
        if (box) box.checked = true;
      }
      update();
    });
    update();
  }

  function ready() {
    Array.prototype.forEach.call(document.querySelectorAll("[data-formula]"), setUp);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", ready);
  else ready();
})();
