/* cultura view: filters on trial and disagreement pages, the role toggle, id look-up on go.html. No network, no
   libraries. */
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
  var noun = form.dataset.noun || "trials";
  function setRoles(on) {
    if (!toggle) { return; }
    body.classList.toggle("show-roles", on);
    toggle.textContent = on ? "hide roles" : "show roles";
  }
  // a section matches when each chosen filter but role equals its data-<name>; role picks candidates
  function matchesAll(data, f) {
    return Object.keys(f).every(function (k) { return k === "role" || !f[k] || data[k] === f[k]; });
  }
  function apply() {
    var f = {};
    selects.forEach(function (s) { f[s.name] = s.value; });
    var shown = 0;
    document.querySelectorAll("section.trial, section.item").forEach(function (t) {
      var ok = matchesAll(t.dataset, f);
      var cands = t.querySelectorAll("li.cand");
      if (cands.length) {
        var any = false;
        cands.forEach(function (c) {
          var hit = !f.role || c.dataset.role === f.role;
          c.classList.toggle("role-hidden", !hit);
          any = any || hit;
        });
        ok = ok && any;
      }
      t.hidden = !ok;
      if (ok) { shown += 1; }
    });
    if (f.role) { setRoles(true); }
    document.getElementById("shown").textContent = shown + " " + noun + " on this page match";
    var q = new URLSearchParams();
    Object.keys(f).forEach(function (k) { if (f[k]) { q.set(k, f[k]); } });
    var qs = q.toString();
    document.querySelectorAll("nav.pager a").forEach(function (a) {
      a.href = a.getAttribute("href").split("?")[0] + (qs ? "?" + qs : "");
    });
    var matches = document.getElementById("matches");
    // the whole listing's index: trials as [page, country, concept], items as {page, kind, campaign, …}
    var index = null;
    if (window.CULTURA_TRIALS && (f.country || f.concept)) {
      index = window.CULTURA_TRIALS.map(function (t) { return {page: t[0], country: t[1], concept: t[2]}; });
    } else if (window.CULTURA_ITEMS && Object.keys(f).some(function (k) { return f[k]; })) {
      index = window.CULTURA_ITEMS;
    }
    if (matches && index) {
      var pages = [], total = 0;
      index.forEach(function (t) {
        if (matchesAll(t, f)) {
          total += 1;
          if (pages.indexOf(t.page) < 0) { pages.push(t.page); }
        }
      });
      matches.textContent = total + " " + noun + " in all match, on " + pages.length + " page(s): ";
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
  if (toggle) {
    toggle.addEventListener("click", function () { setRoles(!body.classList.contains("show-roles")); });
  }
  apply();
}());
