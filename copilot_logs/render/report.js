(function () {
  var tip = document.getElementById('tip');
  function show(mark) {
    var title = mark.querySelector('title');
    if (!title) { return; }
    tip.textContent = title.textContent;
    tip.hidden = false;
    var box = mark.getBoundingClientRect();
    var room = window.scrollX + document.documentElement.clientWidth - tip.offsetWidth - 8;
    tip.style.left = Math.max(window.scrollX + 4, Math.min(box.left + window.scrollX, room)) + 'px';
    tip.style.top = (box.bottom + window.scrollY + 6) + 'px';
  }
  function hide() { tip.hidden = true; }
  function markOf(target) { return target.closest ? target.closest('.mark') : null; }
  document.addEventListener('mouseover', function (e) {
    var mark = markOf(e.target);
    if (mark) { show(mark); } else { hide(); }
  });
  document.addEventListener('focusin', function (e) {
    var mark = markOf(e.target);
    if (mark) { show(mark); }
  });
  document.addEventListener('focusout', hide);
  document.addEventListener('keydown', function (e) { if (e.key === 'Escape') { hide(); } });
  function key(row, column, numeric) {
    var value = row.cells[column].getAttribute('data-v');
    if (value === null || value === '') { return null; }
    return numeric ? parseFloat(value) : value.toLowerCase();
  }
  document.querySelectorAll('table.sortable').forEach(function (table) {
    var heads = table.querySelectorAll('thead th');
    heads.forEach(function (th, column) {
      th.querySelector('button').addEventListener('click', function () {
        var ascending = th.getAttribute('aria-sort') !== 'ascending';
        var numeric = th.classList.contains('num');
        heads.forEach(function (other) { other.removeAttribute('aria-sort'); });
        th.setAttribute('aria-sort', ascending ? 'ascending' : 'descending');
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = key(a, column, numeric), y = key(b, column, numeric);
          if (x === y) { return 0; }
          if (x === null) { return 1; }
          if (y === null) { return -1; }
          return (x < y ? -1 : 1) * (ascending ? 1 : -1);
        });
        rows.forEach(function (row) { body.appendChild(row); });
        var shown = table.getAttribute('data-shown');
        if (shown !== null) {  // the first rows in the new order are the ones shown
          rows.forEach(function (row, index) {
            row.classList.toggle('more', index >= parseInt(shown, 10));
          });
        }
      });
    });
  });
  document.documentElement.setAttribute('data-ready', 'yes');
})();
