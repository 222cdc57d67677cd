// agentapi console: progressive enhancement only. Every page works without
// this file; it adds copy buttons, confirmation dialogs, the key form's
// preset-to-Custom switch, and the Logs page's row links and live tail.
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
  // Logs: a row opens its request's detail; the time filter's From and To
  // show only for a custom range; the live tail follows new requests.
  var logs = document.querySelector("#logs tbody");
  if (logs) {
    logs.addEventListener("click", function (ev) {
      var row = ev.target.closest("tr[data-href]");
      if (!row || ev.target.closest("a, button") || (window.getSelection && String(window.getSelection()))) { return; }
      window.location.assign(row.getAttribute("data-href"));
    });
  }
  var range = document.getElementById("filter-range");
  var customRange = document.getElementById("custom-range");
  if (range && customRange) {
    var showCustom = function () {
      customRange.hidden = range.value !== "custom" && !document.getElementById("filter-from").value && !document.getElementById("filter-to").value;
    };
    range.addEventListener("change", function () {
      if (range.value !== "custom") {
        document.getElementById("filter-from").value = "";
        document.getElementById("filter-to").value = "";
      }
      showCustom();
    });
    showCustom();
  }
  var tailBtn = document.getElementById("tail-toggle");
  if (tailBtn && logs && window.EventSource) {
    tailLogs(tailBtn, logs, document.getElementById("tail-status"));
  }

  // tailLogs runs the Logs page's live tail: an EventSource on the
  // button's data-src (the page's filters), each "log" event a row put on
  // top (rows already shown are skipped), closed while the tab is hidden
  // and opened again from the newest row seen, and stopped for good by
  // the server's "end" event (its bounds), whose text it shows.
  function tailLogs(btn, tbody, status) {
    var es = null, on = false, last = 0, added = 0, maxRows = 500;
    var fresh = document.getElementById("tail-new");
    btn.hidden = false;
    tbody.querySelectorAll("tr[data-at]").forEach(function (r) { last = Math.max(last, Number(r.getAttribute("data-at")) || 0); });
    var say = function (text, cls) { status.textContent = text; status.className = "tail-status " + (cls || ""); };
    var open = function () {
      var src = btn.getAttribute("data-src");
      if (last) { src += (src.indexOf("?") >= 0 ? "&" : "?") + "since=" + last; }
      es = new EventSource(src);
      es.addEventListener("open", function () { say("Live: following new requests", "live"); });
      es.addEventListener("log", function (ev) {
        var t = document.createElement("template");
        t.innerHTML = ev.data.trim();
        var row = t.content.firstElementChild;
        if (!row || row.tagName !== "TR") { return; }
        var id = row.getAttribute("data-request-id");
        last = Math.max(last, Number(row.getAttribute("data-at")) || 0);
        if (Array.prototype.some.call(tbody.rows, function (r) { return r.getAttribute("data-request-id") === id; })) { return; }
        var empty = document.getElementById("no-logs");
        if (empty) { empty.remove(); }
        row.classList.add("fresh");
        tbody.insertBefore(row, tbody.firstChild);
        added++;
        if (fresh) { fresh.textContent = "+" + added + " new"; }
        while (tbody.rows.length > maxRows) { tbody.deleteRow(-1); }
      });
      es.addEventListener("end", function (ev) {
        stop();
        say(ev.data, "ended");
        btn.textContent = "Resume live tail";
      });
      es.addEventListener("error", function () {
        if (es && es.readyState === EventSource.CONNECTING) { say("Reconnecting…"); }
      });
    };
    var close = function () { if (es) { es.close(); es = null; } };
    var stop = function () {
      close();
      on = false;
      btn.setAttribute("aria-pressed", "false");
      btn.textContent = "Live tail";
    };
    btn.setAttribute("aria-pressed", "false");
    btn.addEventListener("click", function () {
      if (on) { stop(); say("Live tail stopped."); return; }
      on = true;
      btn.setAttribute("aria-pressed", "true");
      btn.textContent = "Stop live tail";
      say("Connecting…");
      if (!document.hidden) { open(); }
    });
    document.addEventListener("visibilitychange", function () {
      if (!on) { return; }
      if (document.hidden) {
        close();
        say("Paused while this tab is hidden");
      } else if (!es) {
        open();
      }
    });
  }
})();
