// agentapi console: progressive enhancement only. Every page works without
// this file; it adds copy buttons and confirmation dialogs.
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
  // Custom scopes matter only with the Custom preset.
  var custom = document.getElementById("custom-scopes");
  if (custom) {
    var sync = function () {
      var c = document.getElementById("preset-custom");
      custom.classList.toggle("dimmed", !(c && c.checked));
    };
    document.querySelectorAll("input[name=preset]").forEach(function (r) { r.addEventListener("change", sync); });
    sync();
  }
})();
