/* headscope pages' smallest helpers, first in the script of both pages (index.html before
 * core.js, patch.html before patch.js): the dash of a missing value, an element by id, a
 * new element, and numbers as the pages print them (4 decimals, 1 from 1000 up, no "-0"). */
'use strict';
const DASH = '\u2014';
function $(id) { return document.getElementById(id); }
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}
function isNum(v) { return typeof v === 'number' && isFinite(v); }
function fmt(v, d) {
  if (!isNum(v)) return DASH;
  let s = Math.abs(v) >= 1000 ? v.toFixed(1) : v.toFixed(d === undefined ? 4 : d);
  if (/^-0[.0]*$/.test(s)) s = s.slice(1);
  return s;
}
