// Sorting and filtering for tables marked data-sortable, and opening a group's detail from a link. No framework:
// the page must work offline from a file and inside Airflow.
(function () {
  "use strict";

  function cellValue(row, index) {
    var cell = row.cells[index];
    var raw = cell.getAttribute("data-value");
    if (raw === null) return cell.textContent.trim().toLowerCase();
    var n = Number(raw);
    return raw === "" ? null : (isNaN(n) ? raw.toLowerCase() : n);
  }

  function sortBy(table, th) {
    var index = Array.prototype.indexOf.call(th.parentNode.children, th);
    var descending = th.getAttribute("aria-sort") !== "descending";
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (other) { other.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", descending ? "descending" : "ascending");
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = cellValue(a, index), y = cellValue(b, index);
      if (x === y) return 0;
      if (x === null) return 1;  // missing values last, either way
      if (y === null) return -1;
      return (x < y ? -1 : 1) * (descending ? -1 : 1);
    });
    rows.forEach(function (row) { body.appendChild(row); });
  }

  // Rows drawn at a time: a report of 10,000 groups lays out 200 rows until "show more" is chosen.
  var PAGE = 200;

  function applyFilters(table, form) {
    var text = (form.querySelector("[data-filter=text]") || {}).value || "";
    var status = (form.querySelector("[data-filter=status]") || {}).value || "";
    var changing = form.querySelector("[data-filter=changing]");
    var needle = text.trim().toLowerCase();
    var limit = Number(table.getAttribute("data-limit") || PAGE);
    var matching = 0, shown = 0, rows = table.tBodies[0].rows;
    for (var i = 0; i < rows.length; i++) {
      var r = rows[i];
      var ok = (!needle || r.getAttribute("data-group").toLowerCase().indexOf(needle) >= 0) &&
        (!status || r.getAttribute("data-status") === status) &&
        (!changing || !changing.checked || r.getAttribute("data-changes") === "true");
      if (ok) matching++;
      r.hidden = !ok || matching > limit;
      if (!r.hidden) shown++;
    }
    var more = document.querySelector("[data-more-for='" + table.id + "']");
    if (more) more.hidden = matching <= limit;
    var out = form.querySelector("[data-filter-count]");
    if (out) out.textContent = "showing " + shown.toLocaleString("en-US") + " of " +
      (matching > shown ? matching.toLocaleString("en-US") + " matching, " : "") + rows.length.toLocaleString("en-US");
  }

  function openFromHash() {
    if (!location.hash) return;
    var target = document.getElementById(decodeURIComponent(location.hash.slice(1)));
    if (target && target.tagName === "DETAILS") {
      target.open = true;
      target.scrollIntoView();
    }
  }

  document.addEventListener("DOMContentLoaded", function () {
    Array.prototype.forEach.call(document.querySelectorAll("table[data-sortable]"), function (table) {
      Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
        var button = th.querySelector("button");
        if (button) button.addEventListener("click", function () {
          sortBy(table, th);
          if (form) applyFilters(table, form);  // the first page of the new order
        });
      });
      var form = document.querySelector("form[data-filters-for='" + table.id + "']");
      if (!form) return;
      var more = document.querySelector("[data-more-for='" + table.id + "']");
      if (more) more.addEventListener("click", function () {
        table.setAttribute("data-limit", String(Number(table.getAttribute("data-limit") || PAGE) + PAGE));
        applyFilters(table, form);
      });
      form.addEventListener("input", function () { applyFilters(table, form); });
      form.addEventListener("submit", function (e) { e.preventDefault(); });
      Array.prototype.forEach.call(document.querySelectorAll("[data-set-status]"), function (chip) {
        chip.addEventListener("click", function () {
          form.querySelector("[data-filter=status]").value = chip.getAttribute("data-set-status");
          applyFilters(table, form);
          table.scrollIntoView();
        });
      });
      applyFilters(table, form);
    });
    window.addEventListener("hashchange", openFromHash);
    openFromHash();
  });
})();
