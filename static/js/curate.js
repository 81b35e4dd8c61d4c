// Curate's own script: progressive enhancement only. Every action works
// without it; it adds confirmation before destructive form posts, brings a
// refused form's first message into view, picks the choice a field belongs
// to, and labels table cells so a phone can show each row as a block.
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
  // A refused form comes back with its messages beside its fields; the
  // first of them may be far from the button pressed. Bring it into the
  // window and put the cursor in its field, on a page shown after a plain
  // post and on a form htmx swapped in after a refusal alike.
  function showRefusal(root) {
    var scope = root && root.querySelectorAll ? root : document;
    var errors = scope.querySelectorAll("form .form-error, form .field-error");
    var first = null;
    for (var i = 0; i < errors.length; i++) {
      if (errors[i].textContent.trim() !== "" && errors[i].offsetParent !== null) { first = errors[i]; break; }
    }
    if (!first) return;
    first.scrollIntoView({ block: "center" });
    var field = fieldOf(first);
    if (field) field.focus({ preventScroll: true });
  }
  // fieldOf is the field a message is about: the one it describes, else
  // the last field before it in the form, else the first one after.
  function fieldOf(msg) {
    var controls = "input:not([type=hidden]):not([disabled]), select:not([disabled]), textarea:not([disabled])";
    if (msg.id) {
      var described = document.querySelector('[aria-describedby~="' + msg.id.replace(/(["\\])/g, "\\$1") + '"]');
      if (described) return described;
    }
    var form = msg.closest("form");
    if (!form) return null;
    var all = form.querySelectorAll(controls), before = null, after = null;
    for (var i = 0; i < all.length; i++) {
      if (all[i].compareDocumentPosition(msg) & Node.DOCUMENT_POSITION_FOLLOWING) before = all[i];
      else if (!after) after = all[i];
    }
    return before || after;
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () { showRefusal(document); });
  } else {
    showRefusal(document);
  }
  document.addEventListener("htmx:afterSettle", function (ev) {
    var status = ev.detail && ev.detail.xhr && ev.detail.xhr.status;
    if (status === 409 || status === 422) showRefusal(ev.target);
  });

  // A field with data-picks="ID" checks the radio ID when it is used: the
  // name of a new dataset picks "A new dataset".
  function pick(ev) {
    var id = ev.target.getAttribute && ev.target.getAttribute("data-picks");
    var radio = id && document.getElementById(id);
    if (radio && !radio.checked) radio.checked = true;
  }
  document.addEventListener("input", pick);
  document.addEventListener("change", pick);

  // Each body cell of a .table with a header gets its column's name in
  // data-label (unless it has one), and the table the class "stacks": on
  // a narrow screen the stylesheet then shows every row as a block of
  // "column: value" lines instead of columns running off-screen. Spanning
  // cells take the name of the first column they cover.
  function labelTable(table) {
    var head = table.tHead && table.tHead.rows[table.tHead.rows.length - 1];
    if (!head) return;
    var names = [];
    Array.prototype.forEach.call(head.cells, function (th) {
      var name = th.innerText.replace(/\s+/g, " ").trim();
      for (var i = 0; i < th.colSpan; i++) names.push(i === 0 ? name : "");
    });
    Array.prototype.forEach.call(table.tBodies, function (body) {
      Array.prototype.forEach.call(body.rows, function (row) {
        var col = 0;
        Array.prototype.forEach.call(row.cells, function (cell) {
          if (!cell.hasAttribute("data-label") && cell.colSpan < names.length) {
            cell.setAttribute("data-label", names[col] || "");
          }
          col += cell.colSpan;
        });
      });
    });
    table.classList.add("stacks");
  }
  function labelTables(root) {
    var tables = root.querySelectorAll ? root.querySelectorAll("table.table") : [];
    Array.prototype.forEach.call(tables, labelTable);
    if (root.matches && root.matches("table.table")) labelTable(root);
    var inTable = root.closest && root.closest("table.table");
    if (inTable) labelTable(inTable);
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () { labelTables(document); });
  } else {
    labelTables(document);
  }
  // Rows and tables swapped in by htmx are labelled as they settle.
  document.addEventListener("htmx:afterSettle", function (ev) { labelTables(ev.target); });
})();
