// autopatch console: live updates over Server-Sent Events, and "show all" in place. Every page
// is complete without this script: it only keeps what is shown current.
//  - A running job's page follows GET /jobs/N/events: timeline rows (each event id once: the
//    stream resumes after the page's last rendered id, and on a reconnect after the browser's
//    Last-Event-ID; ids already shown are skipped), and the state, stage and counters.
//  - The job list follows GET /events: changed rows are replaced, new ones inserted (on the
//    first page), rows that leave the filter removed, and the counts kept current.
(function () {
  "use strict";
  var status = document.getElementById("live-status");
  function say(text) { if (status) status.textContent = text; }
  function setText(id, text, cls) {
    var el = document.getElementById(id);
    if (!el) return;
    el.textContent = String(text);
    if (cls) el.className = cls;
  }

  // "Show all": load the whole output into the <pre> above the link.
  document.addEventListener("click", function (ev) {
    var a = ev.target && ev.target.closest ? ev.target.closest("a.show-all") : null;
    if (!a || !window.fetch) return;
    ev.preventDefault();
    fetch(a.href, { credentials: "same-origin" }).then(function (r) {
      if (!r.ok) throw new Error(String(r.status));
      return r.text();
    }).then(function (text) {
      var note = a.parentNode, pre = note.previousElementSibling;
      if (pre && pre.tagName === "PRE") pre.textContent = text;
      note.textContent = "Showing all of it.";
    }).catch(function () { window.location.href = a.href; });
  });

  if (!window.EventSource) return;

  function followJob(tbody) {
    var job = tbody.getAttribute("data-job"), seen = {};
    var rows = tbody.querySelectorAll("tr[data-event]");
    for (var i = 0; i < rows.length; i++) seen[rows[i].getAttribute("data-event")] = true;
    var src = new EventSource("/jobs/" + encodeURIComponent(job) + "/events?after=" +
                              encodeURIComponent(tbody.getAttribute("data-last") || "0"));
    src.onopen = function () { say("Live: this page follows the job as it runs."); };
    src.onerror = function () { say("The live connection dropped: reconnecting."); };
    src.onmessage = function (m) {
      if (!m.lastEventId || seen[m.lastEventId]) return;
      seen[m.lastEventId] = true;
      var e = JSON.parse(m.data), row = document.createElement("tr");
      var cells = [e.time, e.stage || "", e.message];
      row.className = "live-event";
      row.setAttribute("data-event", m.lastEventId);
      for (var i = 0; i < cells.length; i++) {
        var td = document.createElement("td");
        if (i === 0) {
          var t = document.createElement("time");
          t.setAttribute("datetime", e.time);
          t.textContent = String(e.time).slice(11, 19);
          td.appendChild(t);
        } else {
          td.textContent = cells[i];
        }
        row.appendChild(td);
      }
      tbody.appendChild(row);
      tbody.setAttribute("data-last", m.lastEventId);
    };
    src.addEventListener("job", function (m) {
      var f = JSON.parse(m.data);
      setText("job-state", f.state, "state-" + f.state);
      setText("job-stage", f.stage);
      setText("job-cost", f.cost);
      setText("job-tokens", f.tokens);
      setText("job-calls", f.calls);
      setText("job-duration", f.duration);
      if (f.state === "running") setText("outcome", "Working on it: " + f.stage + ".");
    });
    src.addEventListener("end", function (m) {
      src.close();
      var f = JSON.parse(m.data);
      setText("job-state", f.state, "state-" + f.state);
      say("The job has finished (" + f.state + "): loading its evidence and diff.");
      window.location.reload();
    });
  }

  function followList(tbody) {
    var query = tbody.getAttribute("data-query") || "";
    function bump(by) {
      var n = document.getElementById("matching");
      if (n) n.textContent = String(Number(n.textContent) + by);
    }
    var src = new EventSource("/events?after=" +
                              encodeURIComponent(tbody.getAttribute("data-last") || "0") +
                              (query ? "&" + query : ""));
    src.addEventListener("job", function (m) {
      var d = JSON.parse(m.data), old = document.getElementById("job-" + d.id);
      if (!d.match) {
        if (old) {
          old.parentNode.removeChild(old);
          bump(-1);
        }
        return;
      }
      var holder = document.createElement("tbody");
      holder.innerHTML = d.html;
      var row = holder.firstElementChild;
      if (!row) return;
      if (old) {
        old.parentNode.replaceChild(row, old);
        return;
      }
      if (tbody.getAttribute("data-first") !== "1") return;
      // Newest first: before the first row of an older job.
      var next = tbody.firstElementChild;
      while (next && Number(next.id.slice(4)) > d.id) next = next.nextElementSibling;
      tbody.insertBefore(row, next);
      bump(1);
      var none = document.getElementById("no-jobs");
      if (none) none.parentNode.removeChild(none);
    });
    src.addEventListener("counts", function (m) {
      var c = JSON.parse(m.data);
      for (var k in c) setText("count-" + k, c[k]);
    });
  }

  var events = document.getElementById("events");
  if (events && events.getAttribute("data-live") === "1") followJob(events);
  var jobs = document.getElementById("jobs");
  if (jobs) followList(jobs);
})();
