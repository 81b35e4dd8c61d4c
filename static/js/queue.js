// The feedback queue's keyboard and small conveniences. Every action is a
// real form that works without this script; it adds shortcuts (j/k move,
// or open the next/previous item on an item page, a approve, r reject,
// c correct, t tag, x select, ? help), shows the bulk bar only while rows
// are selected, lets htmx show the conflict and validation answers in
// place, and keeps the filter URL free of empty fields.
(function () {
  "use strict";

  function typing(el) {
    if (!el || el === document.body) return false;
    var tag = el.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || el.isContentEditable;
  }

  function rows() {
    return Array.prototype.slice.call(document.querySelectorAll("#queue tr[data-item]"));
  }

  function currentRow() {
    var a = document.activeElement;
    return a && a.closest ? a.closest("#queue tr[data-item]") : null;
  }

  function move(step) {
    var list = rows();
    if (list.length === 0) return;
    var i = list.indexOf(currentRow());
    i = i < 0 ? (step > 0 ? 0 : list.length - 1) : Math.min(list.length - 1, Math.max(0, i + step));
    list[i].focus();
    list[i].scrollIntoView({ block: "nearest" });
  }

  // postRow submits a status change for a queue row as a plain form, so
  // the server answers with a redirect back to the queue and a flash.
  function postRow(row, status) {
    var queue = document.querySelector("[data-queue]");
    var form = document.createElement("form");
    var query = queue.dataset.itemQuery || "";
    form.method = "post";
    form.action = "/feedback/" + row.dataset.item + "/status" + (query ? "?" + query : "");
    var fields = { _csrf: queue.dataset.csrf, version: row.dataset.version, status: status, "return": "queue" };
    Object.keys(fields).forEach(function (k) {
      var input = document.createElement("input");
      input.type = "hidden";
      input.name = k;
      input.value = fields[k];
      form.appendChild(input);
    });
    document.body.appendChild(form);
    form.submit();
  }

  function follow(sel) {
    var a = document.querySelector(sel);
    if (a && a.href) location.href = a.href;
  }

  // The bulk bar shows while rows are selected (or "all matching" is
  // chosen), with the number selected. Without this script it is always
  // shown.
  function updateBulkBar() {
    var bar = document.querySelector("[data-bulk-bar]");
    if (!bar) return;
    var n = document.querySelectorAll("#queue [data-select]:checked").length;
    var all = document.getElementById("bulk-all");
    bar.hidden = n === 0 && !(all && all.checked);
    var count = document.getElementById("bulk-count");
    if (count) count.textContent = all && all.checked ? "All matching" : (n === 1 ? "1 item selected" : n + " items selected");
    var page = document.querySelector("[data-select-page]");
    if (page) {
      var boxes = document.querySelectorAll("#queue [data-select]").length;
      page.checked = boxes > 0 && n === boxes;
      page.indeterminate = n > 0 && n < boxes;
    }
  }

  function click(sel) {
    var el = document.querySelector(sel);
    if (el && !el.disabled) el.click();
    return !!el;
  }

  // focusField moves focus to a field when the shortcut's key is released,
  // so the key that asked for the field is never typed into it.
  var pendingFocus = null;
  function focusField(sel) {
    pendingFocus = document.querySelector(sel);
  }
  function focusPending() {
    var el = pendingFocus;
    pendingFocus = null;
    if (!el) return;
    el.focus();
    el.scrollIntoView({ block: "center" });
  }
  document.addEventListener("keyup", focusPending);

  function showShortcuts() {
    var d = document.getElementById("shortcuts");
    if (d && !d.open) d.showModal();
  }

  var queueKeys = {
    j: function () { move(1); },
    k: function () { move(-1); },
    o: function (row) { if (row) location.href = row.dataset.href; },
    Enter: function (row) { if (row) location.href = row.dataset.href; },
    x: function (row) {
      var box = row && row.querySelector("[data-select]");
      if (box) { box.checked = !box.checked; row.classList.toggle("selected", box.checked); }
      updateBulkBar();
    },
    a: function (row) { if (row && document.getElementById("bulk")) postRow(row, "approved"); },
    r: function (row) { if (row && document.getElementById("bulk")) postRow(row, "rejected"); },
    c: function (row) { if (row) location.href = row.dataset.href + (row.dataset.href.indexOf("?") < 0 ? "?" : "&") + "edit=1"; },
    t: function (row) {
      var box = row && row.querySelector("[data-select]");
      if (box) { box.checked = true; row.classList.add("selected"); }
      updateBulkBar();
      var op = document.getElementById("bulk-op");
      if (op) op.value = "tag";
      focusField("#bulk-tag");
    }
  };

  var itemKeys = {
    a: function () { click("#approve"); },
    r: function () { click("#reject"); },
    c: function () { focusField("#correction"); },
    t: function () { focusField("#tags-input"); },
    n: function () { focusField("#note-input"); },
    j: function () { follow("#next-item"); },
    k: function () { follow("#prev-item"); },
    u: function () {
      var item = document.querySelector("[data-item-page]");
      if (item) location.href = item.dataset.back;
    }
  };

  document.addEventListener("keydown", function (ev) {
    if (ev.defaultPrevented || ev.altKey || ev.metaKey || (ev.ctrlKey && ev.key !== "Enter")) return;
    var target = ev.target;
    if (typing(target)) {
      if (ev.key === "Escape") target.blur();
      // Ctrl+Enter in the correction editor saves it.
      if (ev.key === "Enter" && ev.ctrlKey && target.id === "correction") {
        ev.preventDefault();
        if (target.form.requestSubmit) target.form.requestSubmit(); else target.form.submit();
      }
      return;
    }
    if (ev.ctrlKey) return;
    if (ev.key === "?") {
      ev.preventDefault();
      showShortcuts();
      return;
    }
    var handler = null;
    if (document.querySelector("[data-item-page]")) {
      handler = itemKeys[ev.key];
    } else if (document.querySelector("[data-queue]")) {
      // Enter on a focused link or button keeps its own meaning.
      if (ev.key === "Enter" && !currentRow()) return;
      handler = queueKeys[ev.key];
    }
    if (!handler) return;
    ev.preventDefault();
    handler(currentRow());
  });

  document.addEventListener("click", function (ev) {
    var btn = ev.target.closest && ev.target.closest("[data-shortcuts-open]");
    if (btn) showShortcuts();
  });

  // Clicking a row's checkbox marks the row, as x does; the header's box
  // selects the whole page.
  document.addEventListener("change", function (ev) {
    var box = ev.target;
    if (!box.matches) return;
    if (box.matches("[data-select]")) {
      var row = box.closest("tr");
      if (row) row.classList.toggle("selected", box.checked);
    } else if (box.matches("[data-select-page]")) {
      Array.prototype.forEach.call(document.querySelectorAll("#queue [data-select]"), function (b) {
        b.checked = box.checked;
        var r = b.closest("tr");
        if (r) r.classList.toggle("selected", box.checked);
      });
    } else if (!box.closest("[data-bulk-bar]")) {
      return;
    }
    updateBulkBar();
  });

  // Empty filter fields stay out of the URL, so shared links read cleanly.
  document.addEventListener("submit", function (ev) {
    var form = ev.target;
    if (!form.hasAttribute("data-clean-empty")) return;
    Array.prototype.forEach.call(form.elements, function (el) {
      if (el.name && !el.disabled && el.value === "" && el.type !== "submit") el.disabled = true;
    });
    // Leave the fields usable if the page is kept (back/forward cache).
    setTimeout(function () {
      Array.prototype.forEach.call(form.elements, function (el) { el.disabled = false; });
    }, 0);
  });

  // A conflict (409) or a refused input (422) comes back as the item
  // fragment with its message: show it in place instead of dropping it.
  document.addEventListener("htmx:beforeSwap", function (ev) {
    var status = ev.detail.xhr.status;
    if ((status === 409 || status === 422) && ev.detail.target && ev.detail.target.id === "item") {
      ev.detail.shouldSwap = true;
      ev.detail.isError = false;
    }
  });

  // The item page opened with edit=1 (c in the queue) starts in the editor.
  function focusEditorIfAsked() {
    if (/[?&]edit=1(&|$)/.test(location.search)) {
      focusField("#correction");
      focusPending();
    }
  }
  function ready() {
    focusEditorIfAsked();
    updateBulkBar();
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", ready);
  } else {
    ready();
  }
})();
