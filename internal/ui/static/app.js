// rolter web UI behaviour. Loaded as a file (the CSP allows no inline
// script); every page works without it, this only makes it quicker.
(function () {
  "use strict";
  document.documentElement.classList.add("js");

  // Copy buttons: data-copy holds the text.
  document.addEventListener("click", function (e) {
    var b = e.target.closest("[data-copy]");
    if (!b) return;
    var text = b.getAttribute("data-copy");
    var done = function () {
      var old = b.textContent;
      b.textContent = "copied";
      setTimeout(function () { b.textContent = old; }, 1200);
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, function () {});
      return;
    }
    var t = document.createElement("textarea");
    t.value = text;
    t.setAttribute("readonly", "");
    t.className = "offscreen";
    document.body.appendChild(t);
    t.select();
    try { document.execCommand("copy"); done(); } catch (err) { /* nothing to do */ }
    t.remove();
  });

  // Dialogs: data-open-dialog names one; data-close-dialog closes its own.
  // showModal traps focus and closes on Escape.
  document.addEventListener("click", function (e) {
    var o = e.target.closest("[data-open-dialog]");
    if (o) {
      var d = document.getElementById(o.getAttribute("data-open-dialog"));
      if (d && !d.open) d.showModal();
      return;
    }
    var c = e.target.closest("[data-close-dialog]");
    if (c) {
      var dlg = c.closest("dialog");
      if (dlg) dlg.close();
    }
  });

  // A suggestion button fills a field: data-fill-target is the input's id,
  // data-fill-value the value; the field's own checks then run again.
  document.addEventListener("click", function (e) {
    var b = e.target.closest("[data-fill-target]");
    if (!b) return;
    var input = document.getElementById(b.getAttribute("data-fill-target"));
    if (!input) return;
    input.value = b.getAttribute("data-fill-value");
    input.dispatchEvent(new Event("input", { bubbles: true }));
    input.focus();
  });

  // Selects that switch the org or project submit their form on change.
  document.addEventListener("change", function (e) {
    if (e.target.matches("select[data-autosubmit]") && e.target.form) {
      e.target.form.requestSubmit();
    }
  });

  document.addEventListener("focusin", function (e) {
    if (e.target.matches("[data-select-on-focus]")) e.target.select();
  });

  // Dialogs marked data-show-on-load open when they arrive (a secret shown
  // once); data-remove-on-close takes them out of the page when closed,
  // so the secret cannot be reached again.
  function init(root) {
    var found = Array.prototype.slice.call(root.querySelectorAll("dialog[data-show-on-load]"));
    if (root.matches && root.matches("dialog[data-show-on-load]")) found.push(root);
    found.forEach(function (d) {
      if (d.hasAttribute("data-remove-on-close")) {
        d.addEventListener("close", function () { d.remove(); });
      }
      if (!d.open) d.showModal();
    });
  }
  document.addEventListener("DOMContentLoaded", function () { init(document); });
  document.addEventListener("htmx:load", function (e) { init(e.target); });
})();

// Editor rows (route targets, group members) and the inline add-provider
// dialog of the route editor (design 000).
(function () {
  "use strict";

  // data-remove-closest removes the row (the closest match) it sits in.
  document.addEventListener("click", function (e) {
    var b = e.target.closest("[data-remove-closest]");
    if (!b) return;
    var row = b.closest(b.getAttribute("data-remove-closest"));
    if (row) row.remove();
  });

  // A provider picker (data-new-provider names the add-provider dialog):
  // its last entry, "+ New provider…" (value "_new"), opens the dialog for
  // this row and leaves the picker as it was; picking a provider raises
  // "provider-picked", on which htmx asks for the provider's models.
  document.addEventListener("change", function (e) {
    var s = e.target;
    if (!s.matches("select[data-new-provider]")) return;
    if (s.value === "_new") {
      s.value = s.getAttribute("data-current") || "";
      var d = document.getElementById(s.getAttribute("data-new-provider"));
      if (d) {
        d.setAttribute("data-row", s.id);
        if (!d.open) d.showModal();
      }
      return;
    }
    s.setAttribute("data-current", s.value);
    s.dispatchEvent(new Event("provider-picked"));
  });

  // The dialog's answer raises "provider-created" (HX-Trigger) with the new
  // provider: every picker offers it, the row that opened the dialog picks
  // it (and so asks for its models), and the dialog closes.
  document.addEventListener("provider-created", function (e) {
    var p = e.detail || {};
    if (!p.slug) return;
    document.querySelectorAll("select[data-new-provider]").forEach(function (s) {
      var has = Array.prototype.some.call(s.options, function (o) { return o.value === p.slug; });
      if (!has) s.insertBefore(new Option(p.label || p.slug, p.slug), s.querySelector('option[value="_new"]'));
    });
    var d = e.target.closest ? e.target.closest("dialog") : null;
    var sel = d ? document.getElementById(d.getAttribute("data-row") || "") : null;
    if (d && d.open) d.close();
    if (sel) {
      sel.value = p.slug;
      sel.setAttribute("data-current", p.slug);
      sel.dispatchEvent(new Event("provider-picked"));
      sel.focus();
    }
  });
})();

// A form refused with 422 comes back with its errors beside the fields:
// htmx swaps it like a success (by default it swaps no 4xx answer).
document.addEventListener("htmx:beforeSwap", function (e) {
  if (e.detail.xhr.status === 422) {
    e.detail.shouldSwap = true;
    e.detail.isError = false;
  }
});

// Leaving a page ends the one showing of a secret on it, closed or not:
// the browser may keep the page in its back/forward cache and show it
// again on "back".
window.addEventListener("pagehide", function () {
  document.querySelectorAll("dialog[data-remove-on-close]").forEach(function (d) { d.remove(); });
});
