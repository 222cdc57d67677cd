// agentapi console: progressive enhancement only. Every page works without
// this file; it adds copy buttons, confirmation dialogs and the key form's
// preset-to-Custom switch.
(function () {
  "use strict";
  document.querySelectorAll("[data-copy]").forEach(function (btn) {
    var target = document.getElementById(btn.getAttribute("data-copy"));
    if (!target || !navigator.clipboard) { return; }
    btn.hidden = false;
    btn.addEventListener("click", function () {
      navigator.clipboard.writeText(target.textContent.trim()).then(function () {
        btn.textContent = "Copied";
        setTimeout(function () { btn.textContent = "Copy"; }, 2000);
      }, function () {
        btn.textContent = "Select and copy";
      });
    });
  });
  document.querySelectorAll("form[data-confirm]").forEach(function (form) {
    form.addEventListener("submit", function (ev) {
      if (!window.confirm(form.getAttribute("data-confirm"))) { ev.preventDefault(); }
    });
  });
  // Scopes beyond a preset: ticking one flips the form to Custom, with the
  // preset's own scopes ticked too (what the server does without this
  // script); choosing a preset clears the boxes.
  var custom = document.getElementById("preset-custom");
  if (custom) {
    var boxes = document.querySelectorAll("input[name=scope]");
    var presets = document.querySelectorAll("input[name=preset]");
    boxes.forEach(function (box) {
      box.addEventListener("change", function () {
        if (!box.checked || custom.checked) { return; }
        var chosen = document.querySelector("input[name=preset]:checked");
        var own = chosen ? (chosen.getAttribute("data-scopes") || "").split(" ") : [];
        boxes.forEach(function (b) {
          if (own.indexOf(b.value) >= 0) { b.checked = true; }
        });
        custom.checked = true;
      });
    });
    presets.forEach(function (r) {
      r.addEventListener("change", function () {
        if (r.checked && r !== custom) {
          boxes.forEach(function (b) { b.checked = false; });
        }
      });
    });
  }
})();
