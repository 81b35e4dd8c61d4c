// Rubric questions beside an item, from the keyboard: Tab moves from
// question to question, a number key picks a label or a rating (toggles
// one of several labels), Ctrl+Enter saves. Span questions draw spans over
// the answer's words: select words with the mouse, or move over them with
// the arrow keys (Shift extends), then press a label's number or click it;
// Delete removes the span under the cursor. Spans are kept as
// [{"start","end","label"}] in characters of the answer, in a hidden field
// the form sends. Everything else is a plain form that works without this
// script, spans aside.
(function () {
  "use strict";

  function textField(el) {
    if (!el) return false;
    var tag = el.tagName;
    if (tag === "TEXTAREA" || tag === "SELECT" || el.isContentEditable) return true;
    return tag === "INPUT" && !/^(radio|checkbox|button|submit|hidden)$/.test(el.type);
  }

  function digit(key) {
    if (!/^[0-9]$/.test(key)) return -1;
    return key === "0" ? 9 : Number(key) - 1;
  }

  // Span questions: state per question element.
  function spanState(q) {
    if (!q._spans) {
      var input = q.querySelector("[data-spans]");
      var spans = [];
      try { spans = JSON.parse(input.value || "[]") || []; } catch (e) { spans = []; }
      q._spans = { spans: spans, cursor: 0, anchor: -1, input: input };
    }
    return q._spans;
  }

  function tokens(q) {
    return Array.prototype.slice.call(q.querySelectorAll("[data-span-text] .tok"));
  }

  function labelOf(q, i) {
    var buttons = q.querySelectorAll("[data-span-label]");
    return buttons[i] ? buttons[i].dataset.spanLabel : null;
  }

  // render marks the words; with list, it also rewrites the list of spans
  // (only when the spans change, so focus is never pulled from under a
  // button of the list).
  function render(q, list) {
    var st = spanState(q);
    var toks = tokens(q);
    var lo = Math.min(st.anchor, st.cursor), hi = Math.max(st.anchor, st.cursor);
    toks.forEach(function (t, i) {
      var s = Number(t.dataset.s), e = Number(t.dataset.e);
      var marked = st.spans.filter(function (sp) { return sp.start < e && s < sp.end; });
      t.classList.toggle("marked", marked.length > 0);
      t.title = marked.map(function (sp) { return sp.label; }).join(", ");
      t.classList.toggle("cursor", i === st.cursor && q.querySelector("[data-span-text]") === document.activeElement);
      t.classList.toggle("sel", st.anchor >= 0 && i >= lo && i <= hi);
    });
    st.input.value = JSON.stringify(st.spans);
    if (!list) return;
    list = q.querySelector("[data-span-list]");
    if (!list) return;
    list.textContent = "";
    st.spans.forEach(function (sp, n) {
      var words = toks.filter(function (t) { return Number(t.dataset.s) < sp.end && sp.start < Number(t.dataset.e); })
        .map(function (t) { return t.textContent; }).join(" ");
      var li = document.createElement("li");
      li.textContent = sp.label + ": “" + words + "” ";
      var rm = document.createElement("button");
      rm.type = "button";
      rm.className = "link";
      rm.textContent = "remove";
      rm.tabIndex = -1; // from the keyboard: Delete on the span's words
      rm.addEventListener("click", function () { st.spans.splice(n, 1); render(q, true); });
      li.appendChild(rm);
      list.appendChild(li);
    });
  }

  function applyLabel(q, label) {
    var st = spanState(q);
    var toks = tokens(q);
    if (!label || toks.length === 0) return;
    var a = st.anchor >= 0 ? st.anchor : st.cursor;
    var lo = Math.min(a, st.cursor), hi = Math.max(a, st.cursor);
    var span = { start: Number(toks[lo].dataset.s), end: Number(toks[hi].dataset.e), label: label };
    // A span over the same words replaces the one there.
    st.spans = st.spans.filter(function (sp) { return !(sp.start === span.start && sp.end === span.end); });
    st.spans.push(span);
    st.spans.sort(function (x, y) { return x.start - y.start || x.end - y.end; });
    st.anchor = -1;
    render(q, true);
  }

  function removeAtCursor(q) {
    var st = spanState(q);
    var t = tokens(q)[st.cursor];
    if (!t) return;
    var s = Number(t.dataset.s), e = Number(t.dataset.e);
    st.spans = st.spans.filter(function (sp) { return !(sp.start < e && s < sp.end); });
    render(q, true);
  }

  function spanKeys(ev, q) {
    var st = spanState(q);
    var n = tokens(q).length;
    if (n === 0) return false;
    if (ev.key === "ArrowRight" || ev.key === "ArrowLeft") {
      if (ev.shiftKey && st.anchor < 0) st.anchor = st.cursor;
      if (!ev.shiftKey) st.anchor = -1;
      st.cursor = Math.max(0, Math.min(n - 1, st.cursor + (ev.key === "ArrowRight" ? 1 : -1)));
      render(q);
      return true;
    }
    if (ev.key === "Delete" || ev.key === "Backspace") { removeAtCursor(q); return true; }
    if (ev.key === "Escape") { st.anchor = -1; render(q); return true; }
    var i = digit(ev.key);
    if (i >= 0) { applyLabel(q, labelOf(q, i)); return true; }
    return false;
  }

  function pick(q, i) {
    var inputs = q.querySelectorAll("input[type=radio], input[type=checkbox]");
    var input = inputs[i];
    if (!input) return;
    if (input.type === "radio") input.checked = true; else input.checked = !input.checked;
    input.dispatchEvent(new Event("change", { bubbles: true }));
  }

  document.addEventListener("keydown", function (ev) {
    var target = ev.target;
    if (!target.closest) return;
    var form = target.closest("[data-rubric-form]");
    if (!form) return;
    if (ev.key === "Enter" && ev.ctrlKey) {
      ev.preventDefault();
      if (form.requestSubmit) form.requestSubmit(); else form.submit();
      return;
    }
    if (ev.altKey || ev.metaKey || ev.ctrlKey) return;
    var q = target.closest("[data-question]");
    if (!q) return;
    if (target.matches("[data-span-text]")) {
      if (spanKeys(ev, q)) { ev.preventDefault(); ev.stopPropagation(); }
      return;
    }
    if (textField(target)) return;
    var i = digit(ev.key);
    if (i >= 0 && /^(label|labels|rating)$/.test(q.dataset.kind)) {
      ev.preventDefault();
      ev.stopPropagation();
      pick(q, i);
    }
  }, true);

  // The mouse: a selection over the answer's words becomes the span's
  // words; a click sets the cursor.
  document.addEventListener("mouseup", function (ev) {
    var box = ev.target.closest && ev.target.closest("[data-span-text]");
    if (!box) return;
    var q = box.closest("[data-question]");
    var st = spanState(q);
    var toks = tokens(q);
    var sel = window.getSelection();
    var tokOf = function (node) {
      var el = node && (node.nodeType === 1 ? node : node.parentElement);
      return el && el.closest ? el.closest(".tok") : null;
    };
    var a = sel && sel.anchorNode ? tokOf(sel.anchorNode) : null;
    var b = sel && sel.focusNode ? tokOf(sel.focusNode) : null;
    var hit = tokOf(ev.target);
    if (a && b && a !== b) {
      st.anchor = toks.indexOf(a);
      st.cursor = toks.indexOf(b);
    } else if (hit) {
      st.anchor = toks.indexOf(hit);
      st.cursor = st.anchor;
    }
    if (sel && sel.removeAllRanges) sel.removeAllRanges();
    box.focus();
    render(q);
  });

  document.addEventListener("click", function (ev) {
    var btn = ev.target.closest && ev.target.closest("[data-span-label]");
    if (!btn) return;
    var q = btn.closest("[data-question]");
    applyLabel(q, btn.dataset.spanLabel);
    var box = q.querySelector("[data-span-text]");
    if (box) box.focus();
  });

  document.addEventListener("focusin", function (ev) {
    if (ev.target.matches && ev.target.matches("[data-span-text]")) render(ev.target.closest("[data-question]"));
  });
  document.addEventListener("focusout", function (ev) {
    if (ev.target.matches && ev.target.matches("[data-span-text]")) {
      var q = ev.target.closest("[data-question]");
      setTimeout(function () { render(q); }, 0);
    }
  });

  function init() {
    Array.prototype.forEach.call(document.querySelectorAll("[data-span-question]"), function (q) {
      q._spans = null;
      render(q, true);
    });
  }
  document.addEventListener("htmx:afterSwap", init);
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init); else init();
})();
