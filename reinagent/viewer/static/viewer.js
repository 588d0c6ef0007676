// Live progress: elements with data-poll fetch that JSON endpoint and update their data-field
// children while a run is running. Plain DOM, no framework, nothing from the internet.
(function () {
  "use strict";
  const PERIOD_MS = 2000;

  function statusHtml(el, status) {
    el.textContent = status;
    el.className = "status " + status;
  }

  function progress(el, run) {
    const c = run.current_trial;
    const pct = c.expected ? (100 * c.attempted / c.expected) : 100;
    el.querySelector(".label").textContent =
      "trial " + c.trial + "/" + run.num_trials + " \u00b7 " + c.attempted + "/" + c.expected;
    el.querySelector(".fill").style.width = pct.toFixed(1) + "%";
    el.title = "trial " + c.trial + " of " + run.num_trials + ": " + c.attempted + " of " + c.expected + " episodes";
  }

  function update(scope, run) {
    scope.classList && scope.tagName === "TR" && (scope.className = run.status);
    scope.querySelectorAll("[data-field]").forEach(function (el) {
      const field = el.dataset.field;
      if (field === "status") statusHtml(el, run.status);
      else if (field === "progress") progress(el, run);
      else if (field === "solved") el.textContent = run.solved + "/" + run.num_tasks;
      else if (field === "errors") el.textContent = run.errors;
    });
  }

  function pollList(table) {
    const known = Array.from(table.querySelectorAll("tr[data-run]")).map(function (tr) { return tr.dataset.run; });
    function tick() {
      fetch(table.dataset.poll, { cache: "no-store" }).then(function (r) { return r.json(); }).then(function (data) {
        const ids = data.runs.map(function (run) { return run.run_id; });
        if (ids.join("\n") !== known.join("\n")) { window.location.reload(); return; }  // a run appeared or went
        data.runs.forEach(function (run) {
          const row = table.querySelector('tr[data-run="' + CSS.escape(run.run_id) + '"]');
          if (row) update(row, run);
        });
        const running = data.runs.filter(function (run) { return run.status === "running"; }).length;
        const line = document.getElementById("summary-line");
        if (line) line.textContent = data.runs.length + " run(s)" + (running ? ", " + running + " running" : "");
        window.setTimeout(tick, running ? PERIOD_MS : 5 * PERIOD_MS);
      }).catch(function () { window.setTimeout(tick, 5 * PERIOD_MS); });
    }
    window.setTimeout(tick, PERIOD_MS);
  }

  function pollRun(box) {
    function tick() {
      fetch(box.dataset.poll, { cache: "no-store" }).then(function (r) { return r.json(); }).then(function (run) {
        const wasRunning = box.dataset.status === "running";
        update(box, run);
        box.dataset.status = run.status;
        // The tables below are rendered on the server: refresh them once when the run ends.
        if (wasRunning && run.status !== "running") window.location.reload();
        else if (run.status === "running") window.setTimeout(tick, PERIOD_MS);
      }).catch(function () { window.setTimeout(tick, 5 * PERIOD_MS); });
    }
    const status = box.querySelector('[data-field="status"]');
    box.dataset.status = status ? status.textContent : "";
    if (box.dataset.status === "running") window.setTimeout(tick, PERIOD_MS);
  }

  const form = document.getElementById("runs-form");
  if (form) {
    form.addEventListener("submit", function (ev) {
      if (form.querySelectorAll('input[name="run"]:checked').length < 2) {
        ev.preventDefault();
        alert("Tick two or more runs to compare.");
      }
    });
  }
  const table = document.querySelector("table[data-poll]");
  if (table) pollList(table);
  const empty = document.querySelector("#no-runs[data-poll]");
  if (empty) {  // show the first run as soon as one is started
    window.setInterval(function () {
      fetch(empty.dataset.poll, { cache: "no-store" }).then(function (r) { return r.json(); })
        .then(function (data) { if (data.runs.length) window.location.reload(); }).catch(function () {});
    }, 5 * PERIOD_MS);
  }
  const head = document.querySelector("#run-head[data-poll]");
  if (head) pollRun(head);
})();
document.documentElement.dataset.viewerJs = "ready";  // lets a headless browser check the script ran
