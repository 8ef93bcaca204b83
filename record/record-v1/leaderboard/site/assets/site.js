// xaibench leaderboard site: sortable tables, the filter box (folded on narrow screens) and disclosure filters.
// Vanilla JS, no requests.
(function () {
  "use strict";

  // Sort key of a cell: its data-sort attribute ("" = n/a, always sorted last).
  function key(cell, type) {
    if (!cell) return null;
    var raw = cell.getAttribute("data-sort");
    if (raw === null) raw = cell.textContent.trim();
    if (raw === "") return null;
    if (type === "num") {
      var x = parseFloat(raw);
      return isNaN(x) ? null : x;
    }
    return raw.toLowerCase();
  }

  function sortBy(table, th, direction) {
    var column = th.cellIndex;
    var type = th.getAttribute("data-sort-type");
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows).map(function (row, i) {
      return { row: row, i: i, k: key(row.cells[column], type) };
    });
    var sign = direction === "descending" ? -1 : 1;
    rows.sort(function (a, b) {
      if (a.k === null && b.k === null) return a.i - b.i;
      if (a.k === null) return 1;
      if (b.k === null) return -1;
      if (a.k < b.k) return -sign;
      if (a.k > b.k) return sign;
      return a.i - b.i;
    });
    rows.forEach(function (r) { body.appendChild(r.row); });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (cell) {
      if (cell.hasAttribute("data-sort-type")) cell.setAttribute("aria-sort", "none");
    });
    th.setAttribute("aria-sort", direction);
  }

  function setUpSorting(table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
      if (!th.hasAttribute("data-sort-type")) return;
      if (!th.hasAttribute("aria-sort")) th.setAttribute("aria-sort", "none");
      var button = th.querySelector("button");
      if (!button) return;
      button.addEventListener("click", function () {
        var current = th.getAttribute("aria-sort");
        var first = th.getAttribute("data-first") === "desc" ? "descending" : "ascending";
        var next = current === "none" ? first : (current === "ascending" ? "descending" : "ascending");
        sortBy(table, th, next);
      });
    });
  }

  function readData() {
    var block = document.getElementById("xb-data");
    if (!block) return null;
    try { return JSON.parse(block.textContent); } catch (e) { return null; }
  }

  // Lower-case text of a search box ("" when absent).
  function query(input) { return input ? input.value.trim().toLowerCase() : ""; }

  // The filters: explainers by name (the filter box), tuned and reference explainers (the
  // disclosure boxes), tracks by name (on the overview: columns, sections, links).
  function setUpFilters(data) {
    var tuned = document.getElementById("hide-tuned");
    var reference = document.getElementById("hide-reference");
    var status = document.getElementById("filter-status");
    var byName = document.getElementById("filter-explainers");
    var byTrack = document.getElementById("filter-tracks");
    if (!tuned || !reference || !status) return;
    var flags = data && data.explainers ? data.explainers : {};
    function apply() {
      var hidden = {};
      var text = query(byName);
      Array.prototype.forEach.call(document.querySelectorAll("tr[data-key]"), function (row) {
        var name = row.getAttribute("data-key");
        var shown = (row.getAttribute("data-name") || name).toLowerCase();
        var f = Object.prototype.hasOwnProperty.call(flags, name) ? flags[name] : {};
        var hide = (tuned.checked && f.tuned === true) || (reference.checked && f.reference === true) ||
          (text !== "" && shown.indexOf(text) < 0 && name.toLowerCase().indexOf(text) < 0);
        row.hidden = hide;
        if (hide) hidden[name] = true;
      });
      var trackText = query(byTrack);
      var tracksHidden = {};
      if (byTrack) {
        Array.prototype.forEach.call(document.querySelectorAll("[data-track]"), function (el) {
          var track = el.getAttribute("data-track");
          var hide = trackText !== "" && track.toLowerCase().indexOf(trackText) < 0;
          el.hidden = hide;
          if (hide) tracksHidden[track] = true;
        });
      }
      var n = Object.keys(hidden).length;
      var t = Object.keys(tracksHidden).length;
      status.textContent = (n ? n + " explainer" + (n === 1 ? "" : "s") + " hidden. " : "") +
        (t ? t + " track" + (t === 1 ? "" : "s") + " hidden. " : "") +
        "Ranks are computed over all submissions; hiding rows does not re-rank.";
    }
    tuned.addEventListener("change", apply);
    reference.addEventListener("change", apply);
    if (byName) byName.addEventListener("input", apply);
    if (byTrack) byTrack.addEventListener("input", apply);
    apply();
  }

  // The filter box is a closed disclosure in the page (a phone shows the board first); on screens
  // at least WIDE px wide it opens, and it follows the width when the window crosses it.
  var WIDE = 700;
  function foldFilters() {
    var box = document.getElementById("filters");
    if (!box || !window.matchMedia) return;
    var wide = window.matchMedia("(min-width: " + WIDE + "px)");
    box.open = wide.matches;
    var follow = function (e) { box.open = e.matches; };
    if (wide.addEventListener) wide.addEventListener("change", follow);
    else if (wide.addListener) wide.addListener(follow);
  }

  function init() {
    Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), setUpSorting);
    foldFilters();
    setUpFilters(readData());
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
