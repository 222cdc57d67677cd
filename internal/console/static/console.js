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
  // The key form's access table reflects the chosen preset: choosing one
  // ticks exactly its scopes; changing a box under a preset makes the key
  // Custom with the boxes as they are (the server, without this script,
  // keeps a preset's scopes and adds the boxes ticked beyond them).
  var custom = document.getElementById("preset-custom");
  if (custom) {
    var boxes = document.querySelectorAll("input[name=scope]");
    var presets = document.querySelectorAll("input[name=preset]");
    var scopesOf = function (r) { return (r.getAttribute("data-scopes") || "").split(" "); };
    boxes.forEach(function (box) {
      box.addEventListener("change", function () {
        if (custom.checked) { return; }
        var chosen = document.querySelector("input[name=preset]:checked");
        var own = chosen ? scopesOf(chosen) : [];
        var same = true;
        boxes.forEach(function (b) { if (b.checked !== (own.indexOf(b.value) >= 0)) { same = false; } });
        if (!same) { custom.checked = true; }
      });
    });
    presets.forEach(function (r) {
      r.addEventListener("change", function () {
        if (r.checked && r !== custom) {
          var own = scopesOf(r);
          boxes.forEach(function (b) { b.checked = own.indexOf(b.value) >= 0; });
        }
      });
    });
  }
})();
