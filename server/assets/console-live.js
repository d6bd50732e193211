// autopatch console: live updates of a running job's timeline (Server-Sent Events). The page
// is complete without this script; it only appends events as they happen.
(function () {
  var list = document.getElementById("events");
  if (!list || !window.EventSource) return;
  var job = list.getAttribute("data-job"), last = list.getAttribute("data-last") || "0";
  var status = document.getElementById("live-status");
  if (list.getAttribute("data-live") !== "1") return;
  var src = new EventSource("/jobs/" + job + "/events?after=" + encodeURIComponent(last));
  if (status) status.textContent = "Live: new events appear below as they happen.";
  src.onmessage = function (m) {
    var e = JSON.parse(m.data), row = document.createElement("tr"), cells = [e.time, e.stage || "", e.message];
    row.className = "live-event";
    for (var i = 0; i < cells.length; i++) {
      var td = document.createElement("td");
      td.textContent = cells[i];
      row.appendChild(td);
    }
    list.appendChild(row);
  };
  src.addEventListener("end", function () {
    src.close();
    if (status) status.textContent = "The job has finished: reloading.";
    window.location.reload();
  });
})();
