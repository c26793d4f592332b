// Sorting the cost tables: click a column header to sort by it, again to reverse.
document.querySelectorAll("table.sortable").forEach(function (table) {
  table.querySelectorAll("thead th").forEach(function (th, col) {
    th.addEventListener("click", function () {
      var ascending = th.getAttribute("aria-sort") === "descending";
      table.querySelectorAll("thead th").forEach(function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
      var body = table.tBodies[0];
      var key = function (row) {
        var cell = row.cells[col];
        var v = cell.getAttribute("data-v");
        return v === null ? cell.textContent : parseFloat(v);
      };
      Array.from(body.rows)
        .sort(function (a, b) {
          var x = key(a), y = key(b);
          var order = x < y ? -1 : x > y ? 1 : 0;
          return ascending ? order : -order;
        })
        .forEach(function (row) { body.appendChild(row); });
    });
  });
});

// Flame graph per request class or costliest request: the picker shows one group's graph (or
// the whole run's); `#class=NAME` or `#request=ID` in the page's address picks on load.
(function () {
  var pick = document.getElementById("flame-pick");
  if (!pick) return;
  var show = function (key) {
    var groups = document.querySelectorAll(".flame-group");
    var known = Array.from(groups).some(function (g) { return g.getAttribute("data-pick") === key; });
    if (!known) key = "";
    groups.forEach(function (g) { g.hidden = g.getAttribute("data-pick") !== key; });
    pick.value = key;
  };
  pick.addEventListener("change", function () { show(pick.value); });
  var m = /^#((?:class|request)=.*)$/.exec(location.hash);
  if (m) show(decodeURIComponent(m[1]));
})();
