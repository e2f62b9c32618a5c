/* cultura view: filters and role toggle on trial pages, id look-up on go.html. No network, no libraries. */
(function () {
  "use strict";
  var body = document.body;
  // go.html#<anchor>: find the page holding the anchor (ids.js) and open it there
  var status = document.getElementById("go-status");
  if (status) {
    var key = decodeURIComponent(location.hash.slice(1));
    var ids = window.CULTURA_IDS || {};
    if (key && Object.prototype.hasOwnProperty.call(ids, key)) {
      location.replace(ids[key] + "#" + encodeURIComponent(key));
    } else {
      status.textContent = key ? "Nothing called " + key + " in this view (rebuild it with: cultura view)." :
        "No address given.";
    }
    return;
  }
  var form = document.getElementById("filters");
  if (!form) { return; }
  var params = new URLSearchParams(location.search);
  var selects = form.querySelectorAll("select");
  var toggle = document.getElementById("toggle-roles");
  function setRoles(on) {
    body.classList.toggle("show-roles", on);
    toggle.textContent = on ? "hide roles" : "show roles";
  }
  function apply() {
    var f = {};
    selects.forEach(function (s) { f[s.name] = s.value; });
    var shown = 0;
    document.querySelectorAll("section.trial").forEach(function (t) {
      var ok = (!f.country || t.dataset.country === f.country) && (!f.concept || t.dataset.concept === f.concept);
      var cands = t.querySelectorAll("li.cand");
      var any = false;
      cands.forEach(function (c) {
        var hit = !f.role || c.dataset.role === f.role;
        c.classList.toggle("role-hidden", !hit);
        any = any || hit;
      });
      ok = ok && any;
      t.hidden = !ok;
      if (ok) { shown += 1; }
    });
    if (f.role) { setRoles(true); }
    document.getElementById("shown").textContent = shown + " trials on this page match";
    var q = new URLSearchParams();
    Object.keys(f).forEach(function (k) { if (f[k]) { q.set(k, f[k]); } });
    var qs = q.toString();
    document.querySelectorAll("nav.pager a").forEach(function (a) {
      a.href = a.getAttribute("href").split("?")[0] + (qs ? "?" + qs : "");
    });
    var matches = document.getElementById("matches");
    if (matches && window.CULTURA_TRIALS && (f.country || f.concept)) {
      var pages = [], total = 0;
      window.CULTURA_TRIALS.forEach(function (t) {
        if ((!f.country || t[1] === f.country) && (!f.concept || t[2] === f.concept)) {
          total += 1;
          if (pages.indexOf(t[0]) < 0) { pages.push(t[0]); }
        }
      });
      matches.textContent = total + " trials in this benchmark match, on " + pages.length + " page(s): ";
      pages.forEach(function (pg) {
        var a = document.createElement("a");
        a.href = pg + (qs ? "?" + qs : "");
        a.textContent = (pg.match(/-(\d+)\.html$/) || [null, pg])[1];
        matches.appendChild(a);
        matches.appendChild(document.createTextNode(" "));
      });
      matches.hidden = false;
    } else if (matches) {
      matches.hidden = true;
    }
    if (history.replaceState && location.protocol !== "file:") {
      history.replaceState(null, "", location.pathname + (qs ? "?" + qs : "") + location.hash);
    }
  }
  selects.forEach(function (s) {
    var v = params.get(s.name);
    if (v !== null) { s.value = v; }
    s.addEventListener("change", apply);
  });
  toggle.addEventListener("click", function () { setRoles(!body.classList.contains("show-roles")); });
  apply();
}());
