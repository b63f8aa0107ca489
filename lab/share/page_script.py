"""The hand-written script and style of a shared page: no library, no network, text set with textContent.

The script reads the page's JSON data block (`#gl-data`) and fills each run section: the timeline
(a range input with ◀ ▶), the drawing restyled for the selected checkpoint (the classes and text
marks `lab.render` uses), the state tree, the diff from the previous checkpoint (the same rules as
lab/diff.py), the event log, the waits with their verdicts, the recorded calls (live or replayed,
tokens saved), and links to subgraph children. It
never writes HTML from data: every value goes in through `textContent`, so a state holding
`<script>` shows as text. `PANELS` names the per-run panels in order; a new section of the data
model adds a function to it (as the recorded calls did).
"""

from __future__ import annotations

__all__ = ("SCRIPT", "STYLE")

STYLE = """
body{font:14px/1.45 Helvetica,Arial,sans-serif;color:#111;margin:0;padding:16px 24px;background:#fafafa}
h1{font-size:20px;margin:0 0 4px} h2{font-size:17px;margin:18px 0 6px} h3{font-size:15px;margin:14px 0 4px}
.gl-sub{color:#555;margin:0 0 12px}
section.gl-run,section.gl-compare{background:#fff;border:1px solid #ddd;border-radius:6px;padding:12px 16px;margin:0 0 16px}
details.gl-child>summary{cursor:pointer;font-weight:700}
.gl-cols{display:flex;gap:16px;flex-wrap:wrap;align-items:flex-start}
.gl-drawing{flex:0 1 420px;min-width:240px;overflow:auto}
.gl-side{flex:1 1 420px;min-width:300px}
.gl-timeline{display:flex;gap:8px;align-items:center;margin:8px 0}
.gl-timeline input[type=range]{flex:1}
.gl-timeline button{font-size:14px;padding:2px 10px}
.gl-selected{font-family:ui-monospace,Menlo,monospace;font-size:13px}
table{border-collapse:collapse;font-size:12.5px;margin:4px 0}
th,td{border:1px solid #e5e5e5;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f3f4f6}
code,.gl-json{font-family:ui-monospace,Menlo,monospace;font-size:12.5px;white-space:pre-wrap;word-break:break-all}
details.gl-tree{margin-left:2px} details.gl-tree>ul{margin:0;padding-left:18px;list-style:none}
.gl-key{color:#6b21a8}
.gl-added{background:#e7f6ec} .gl-removed{background:#fde8e8} .gl-changed{background:#fff7e0}
.gl-note{color:#666;font-style:italic}
tr.gl-call-replayed td{color:#1d4ed8}
.gl-error{color:#b42318}
.gl-legend span{display:inline-block;margin-right:14px}
.gl-swatch{display:inline-block;width:22px;height:0;border-top:3px solid;vertical-align:middle;margin-right:4px}
""".strip()

SCRIPT = r"""
(function () {
  "use strict";
  var doc = JSON.parse(document.getElementById("gl-data").textContent);
  doc.runs.forEach(function (run) {  // events come as rows of values (lab/share/page.py EVENT_COLUMNS)
    var ev = run.events;
    if (!ev || Array.isArray(ev)) return;
    run.events = ev.rows.map(function (row) {
      var e = {};
      ev.columns.forEach(function (c, k) { e[c] = row[k]; });
      return e;
    });
  });
  var START = "__start__", END = "__end__", ARROW = "\u2192";

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function show(v, limit) {
    var t = JSON.stringify(v);
    if (t === undefined) t = String(v);
    limit = limit || 160;
    return t.length > limit ? t.slice(0, limit - 1) + "\u2026" : t;
  }
  function tree(v, depth) {
    if (v === null || typeof v !== "object") return el("code", "gl-json", JSON.stringify(v));
    var arr = Array.isArray(v), keys = arr ? v.map(function (_, i) { return i; }) : Object.keys(v);
    var d = el("details", "gl-tree");
    if (depth < 2) d.open = true;
    d.appendChild(el("summary", null, arr ? "list [" + keys.length + "]" : "{" + keys.length + " fields}"));
    var ul = el("ul");
    keys.slice(0, 500).forEach(function (k) {
      var li = el("li");
      li.appendChild(el("span", "gl-key", arr ? "[" + k + "]" : k));
      li.appendChild(document.createTextNode(": "));
      li.appendChild(tree(v[k], depth + 1));
      ul.appendChild(li);
    });
    if (keys.length > 500) ul.appendChild(el("li", "gl-note", "\u2026 " + (keys.length - 500) + " more"));
    d.appendChild(ul);
    return d;
  }
  function isObj(v) { return v !== null && typeof v === "object" && !Array.isArray(v); }
  function diff(a, b, path, out) {  // the rules of lab/diff.py: dicts by key, lists by index
    if (isObj(a) && isObj(b)) {
      Object.keys(a).concat(Object.keys(b).filter(function (k) { return !(k in a); })).forEach(function (k) {
        var sub = path ? path + "." + k : k;
        if (!(k in a)) out.push([sub, "added", null, b[k]]);
        else if (!(k in b)) out.push([sub, "removed", a[k], null]);
        else diff(a[k], b[k], sub, out);
      });
    } else if (Array.isArray(a) && Array.isArray(b)) {
      for (var i = 0; i < Math.max(a.length, b.length); i++) {
        var s = path + "[" + i + "]";
        if (i >= a.length) out.push([s, "added", null, b[i]]);
        else if (i >= b.length) out.push([s, "removed", a[i], null]);
        else diff(a[i], b[i], s, out);
      }
    } else if (JSON.stringify(a) !== JSON.stringify(b)) {
      out.push([path || "(state)", "changed", a, b]);
    }
    return out;
  }
  function table(headers, rows) {
    var t = el("table"), tr = el("tr");
    headers.forEach(function (h) { tr.appendChild(el("th", null, h)); });
    t.appendChild(tr);
    rows.forEach(function (r) {
      var row = el("tr", r.cls || null);
      r.cells.forEach(function (c) {
        var td = el("td");
        if (c instanceof Node) td.appendChild(c); else td.textContent = c === null || c === undefined ? "" : String(c);
        row.appendChild(td);
      });
      t.appendChild(row);
    });
    return t;
  }
  function verdict(w) {
    var r = w.resolution;
    if (!r) return "open";
    if (r.approved === true) return "approved";
    if (r.approved === false) return "denied";
    if ("answer" in r) return "answered " + show(r.answer, 80);
    if (r.granted) return "granted " + r.granted;
    if (r.continued) return "continued";
    return show(r, 80);
  }

  function dict() { return Object.create(null); }
  function Steps(run, bySeq) {  // a parallel run's frontiers, counted as lab/render/frontier.py counts them
    var f = run.flow, SEP = "\u0000", passing = dict(), joinKind = dict(), succ = dict(), pred = dict(), how = dict();
    var tallies = dict();
    f.passing.forEach(function (x) { passing[x] = true; });
    f.joins.forEach(function (x) { joinKind[x] = true; });
    f.edges.forEach(function (e) {
      (succ[e[0]] = succ[e[0]] || []).push(e[1]);
      (pred[e[1]] = pred[e[1]] || []).push(e[0]);
    });
    f.edges.forEach(function (e) {  // every task `a` settled, every task `b` ran or holds, or by the steps
      var a = e[0], b = e[1];
      how[a + SEP + b] = !passing[a] && succ[a].length === 1 ? 1 : !passing[b] && pred[b].length === 1 ? 2 : 3;
    });
    function hasParent(cp) { return cp.parent !== null && cp.parent !== undefined && cp.parent in bySeq; }
    function then(base, did) {  // StepTally.then: the parent's tally and one more step
      var settled = dict(), pairs = dict();
      Object.keys(base.settled).forEach(function (k) { settled[k] = base.settled[k]; });
      Object.keys(base.pairs).forEach(function (k) { pairs[k] = base.pairs[k]; });
      did.forEach(function (d) { settled[d[0]] = (settled[d[0]] || 0) + d[1]; });
      base.last.forEach(function (a) {
        did.forEach(function (d) { var k = a + SEP + d[0]; pairs[k] = (pairs[k] || 0) + d[1]; });
      });
      return { settled: settled, pairs: pairs, last: did.map(function (d) { return d[0]; }) };
    }
    function tally(seq) {  // each checkpoint's tally once: its parent's plus its step; a root's is empty
      var chain = [], s = seq;
      while (!(s in tallies)) {
        chain.push(s);
        if (!hasParent(bySeq[s])) break;
        s = bySeq[s].parent;
      }
      for (var i = chain.length - 1; i >= 0; i--) {
        var cp = bySeq[chain[i]];
        tallies[chain[i]] = hasParent(cp) ? then(tallies[cp.parent], cp.step.did) : { settled: dict(), pairs: dict(), last: [] };
      }
      return tallies[seq];
    }
    this.lit = function (cp) {  // lab/share/tree.py lit_data of one checkpoint: node classes and mark lines, edge counts
      var t = tally(cp.seq), st = cp.step, done = cp.status === "done", pending = dict(), open = dict();
      if (done) pending[END] = 1; else st.tasks.forEach(function (p) { pending[p[0]] = p[1]; });
      (st.open || []).forEach(function (j) { open[j] = true; });
      function settledAny(x) { return (t.settled[x] || 0) > 0; }
      function seen(x) { return !passing[x] && (settledAny(x) || (pending[x] || 0) > 0); }
      var came = dict(), went = dict();
      Object.keys(open).forEach(function (j) { went[j] = true; });
      [[came, pred, function (p) { return settledAny(p) && !passing[p]; }], [went, succ, seen]].forEach(function (w) {
        var found = w[0], step = w[1], ok = w[2], changed = true;
        while (changed) {
          changed = false;
          f.passing.forEach(function (x) {
            if (!found[x] && (step[x] || []).some(function (n) { return ok(n) || found[n]; })) { found[x] = true; changed = true; }
          });
        }
      });
      var traversed = [], ins = dict(), outs = dict(), edges = {}, last = dict();
      t.last.forEach(function (a) { last[a] = true; });
      f.edges.forEach(function (e) {
        var a = e[0], b = e[1], reachedA = came[a] && went[a], reachedB = came[b] && went[b];
        if (!((settledAny(a) && !passing[a]) || reachedA) || !(seen(b) || reachedB)) return;
        var k = how[a + SEP + b], n = k === 1 ? t.settled[a] || 0 : k === 2 ? (t.settled[b] || 0) + (pending[b] || 0)
          : (t.pairs[a + SEP + b] || 0) + (last[a] ? pending[b] || 0 : 0);
        n = Math.max(1, n);
        traversed.push([a, b, n]);
        outs[a] = (outs[a] || 0) + n;
        ins[b] = (ins[b] || 0) + n;
        edges[a + ARROW + b] = n;
      });
      var visits = dict();
      Object.keys(t.settled).forEach(function (x) { if (x !== START && t.settled[x] > 0) visits[x] = t.settled[x]; });
      f.passing.forEach(function (x) {
        if (came[x] && went[x] && !open[x]) visits[x] = Math.max(1, joinKind[x] ? outs[x] || 0 : ins[x] || 0);
      });
      var atHead = cp.seq === run.head, failed = atHead ? f.failed : null, held = dict(), joins = dict();
      if (atHead) f.parked.forEach(function (x) { held[x] = true; });
      if (!done && st.joins) Object.keys(st.joins).forEach(function (j) { joins[j] = st.joins[j]; });
      var nodes = {};
      f.nodes.forEach(function (id) {
        var current = id in pending && !held[id] && id !== failed, many = pending[id] || 1, marks = [], cls = [];
        if (id === failed) { marks.push("\u2716 failed"); cls.push("gl-failed"); }
        else if (held[id]) { marks.push("\u2016 waiting"); cls.push("gl-parked"); }
        else if (id in joins) marks.push((current ? "\u25b6 " : "") + joins[id][0] + " of " + joins[id][1]);
        else if (current) marks.push(id === END ? "\u25b6 done" : many > 1 ? "\u25b6 \u00d7" + many : "\u25b6 next");
        if (current && id !== failed && !held[id]) cls.push("gl-current");
        if (id in joins) cls.push("gl-joining");
        if (visits[id]) { marks.push((many > 1 ? "\u00b7 \u00d7" : "\u00d7") + visits[id]); cls.push("gl-visited"); }
        if (cls.length || marks.length) nodes[id] = [cls.join(" "), (run.marks[id] ? [run.marks[id]] : []).concat(marks).join(" ").trim()];
      });
      return { nodes: nodes, edges: edges, next: st.next, settled: cp.station || "" };
    };
  }

  function Viewer(section, run) {
    var bySeq = {}, branches = run.branches && run.branches.length ? run.branches : null;
    run.checkpoints.forEach(function (c) { bySeq[c.seq] = c; });
    var cps = run.checkpoints, n = cps.length;
    var q = function (s) { return section.querySelector(s); };
    var slider = q("input.gl-scrub"), label = q(".gl-label"), picker = q("select.gl-branch");
    var nodes = {}, edges = {};
    section.querySelectorAll(".gl-drawing g[data-station]").forEach(function (g) {
      nodes[g.getAttribute("data-station")] = { g: g, base: g.getAttribute("class"), mark: g.querySelector("text.gl-mark") };
    });
    section.querySelectorAll(".gl-drawing g[data-edge]").forEach(function (g) {
      var t = g.querySelector("text");
      edges[g.getAttribute("data-edge")] = { g: g, text: t, base: t ? t.textContent : null };
    });
    var eventsAll = q(".gl-events-all");
    var self = this, steps = run.flow ? new Steps(run, bySeq) : null;
    this.run = run;
    this.lit = function (seq) { return steps && bySeq[seq] ? steps.lit(bySeq[seq]) : null; };
    this.index = n - 1;

    function paint(cls, marks, hops) {  // classes and mark lines per station, counts per edge
      Object.keys(nodes).forEach(function (id) {
        var o = nodes[id];
        o.g.setAttribute("class", cls[id] ? o.base + " " + cls[id] : o.base);
        if (o.mark) o.mark.textContent = marks[id] || run.marks[id] || " ";
      });
      Object.keys(edges).forEach(function (h) {
        var e = edges[h], k = hops[h] || 0;
        e.g.setAttribute("class", "edge " + (k ? "gl-trav" : "gl-idle"));
        if (e.text && e.base !== null) e.text.textContent = k > 1 ? e.base + " \u00d7" + k : e.base;
      });
    }

    function lightFrontier(lit) {  // a parallel run's super-step, as lab/share/tree.py lit_data draws it
      var cls = {}, marks = {};
      Object.keys(lit.nodes).forEach(function (id) { cls[id] = lit.nodes[id][0]; marks[id] = lit.nodes[id][1]; });
      paint(cls, marks, lit.edges);
    }

    function light(i) {
      var cp = cps[i], path = [], visits = {}, hops = {};
      if (cp.step) { lightFrontier(steps.lit(cp)); return; }
      for (var j = 1; j <= i; j++) if (cps[j].station) path.push(cps[j].station);
      var pending = cp.status === "done" ? [END] : cp.next.map(function (p) { return p.node; });
      var first = path.length ? path[0] : pending[0];
      var seq = first === undefined || first === END ? [] : [START, first];
      path.forEach(function (s) { visits[s] = (visits[s] || 0) + 1; });
      var walk = path.concat(pending.length ? [pending[0]] : []);
      if (seq.length) hops[seq.join(ARROW)] = 1;
      for (var k = 0; k + 1 < walk.length; k++) { var h = walk[k] + ARROW + walk[k + 1]; hops[h] = (hops[h] || 0) + 1; }
      var atHead = cp.seq === run.head;
      var failed = atHead && run.status === "failed" && run.error ? run.error.node_id : null;
      var parked = cp.status === "waiting" && cp.next.length ? cp.next[0].node : null;
      var classes = {}, lines = {};
      Object.keys(nodes).forEach(function (id) {
        var cls = [], marks = [];
        if (run.marks[id]) marks.push(run.marks[id]);
        if (id === failed) { cls.push("gl-failed"); marks.push("\u2716 failed"); }
        else if (id === parked) { cls.push("gl-parked"); marks.push("\u2016 waiting"); }
        else if (pending.indexOf(id) >= 0) { cls.push("gl-current"); marks.push(id === END ? "\u25b6 done" : "\u25b6 next"); }
        if (visits[id]) { cls.push("gl-visited"); marks.push("\u00d7" + visits[id]); }
        classes[id] = cls.join(" ");
        lines[id] = marks.join(" ");
      });
      paint(classes, lines, hops);
    }

    function events(i) {
      var box = q(".gl-events"), seq = cps[i].seq, all = eventsAll.checked;
      var list = all ? run.events : run.events.filter(function (e) { return e.cp === seq; });
      box.textContent = "";
      box.appendChild(el("p", "gl-note", (all ? "all " + list.length + " events" : list.length + " events at checkpoint " + seq) +
        (list.length > 1000 ? " (the first 1000 shown)" : "")));
      box.appendChild(table(["#", "kind", "station", "attempt", "checkpoint", "details", "at"],
        list.slice(0, 1000).map(function (e) {
          return { cells: [e.seq, e.kind, e.node, e.attempt, e.cp, Object.keys(e.payload || {}).length ? show(e.payload) : "", e.at] };
        })));
    }

    this.select = function (i) {
      i = Math.max(0, Math.min(n - 1, i));
      self.index = i;
      slider.value = String(i);
      var cp = cps[i], prev = i > 0 ? cps[i - 1] : null;
      light(i);
      var next = cp.step ? cp.step.next : cp.status === "done" ? "End" : cp.next.map(function (p) { return p.node; }).join(", ") || "End";
      label.setAttribute("data-seq", String(cp.seq));
      label.textContent = (cp.step ? "step " : "checkpoint ") + cp.seq + (cp.seq === run.head ? " (head)" : "") + " \u00b7 " + (i + 1) + " of " + n +
        " \u00b7 " + cp.status + (cp.station ? " \u00b7 settled by " + cp.station : "") + " \u00b7 next " + next;
      var state = q(".gl-state");
      state.textContent = "";
      state.appendChild(el("h3", null, "State at checkpoint " + cp.seq));
      state.appendChild(tree(cp.state, 0));
      if (cp.next.length) {
        state.appendChild(el("h3", null, "Next stations and their inputs"));
        state.appendChild(table(["station", "fields"], cp.next.map(function (p) { return { cells: [p.node, show(p.fields, 400)] }; })));
      }
      var d = q(".gl-diff");
      d.textContent = "";
      d.appendChild(el("h3", null, prev ? "Changes from checkpoint " + prev.seq + " to " + cp.seq : "Changes"));
      var changes = prev ? diff(prev.state, cp.state, "", []) : [];
      if (!changes.length) d.appendChild(el("p", "gl-note", prev ? "no differences" : "the first checkpoint"));
      else d.appendChild(table(["field", "change", "before", "after"], changes.map(function (c) {
        return { cls: "gl-" + c[1], cells: [c[0], c[1], c[1] === "added" ? "" : show(c[2]), c[1] === "removed" ? "" : show(c[3])] };
      })));
      events(i);
    };

    this.branch = 0;
    this.useBranch = function (k, at) {  // the timeline shows branch k (root to its tip), at checkpoint seq `at`
      if (!branches) return;
      self.branch = k;
      picker.value = String(k);
      cps = branches[k].seqs.map(function (s) { return bySeq[s]; });
      n = cps.length;
      slider.max = String(Math.max(0, n - 1));
      var i = at === undefined ? -1 : branches[k].seqs.indexOf(at);
      self.select(i >= 0 ? i : n - 1);
    };
    this.show = function (seq) {  // scrub to checkpoint `seq`, on another branch if this one lacks it
      var i = cps.map(function (c) { return c.seq; }).indexOf(seq);
      if (i >= 0) { self.select(i); return; }
      for (var k = 0; branches && k < branches.length; k++) {
        if (branches[k].seqs.indexOf(seq) >= 0) { self.useBranch(k, seq); return; }
      }
    };
    if (branches) {
      cps = branches[0].seqs.map(function (s) { return bySeq[s]; });
      n = cps.length;
      branches.forEach(function (b, k) { picker.appendChild(el("option", null, b.label)).value = String(k); });
      picker.addEventListener("change", function () { self.useBranch(parseInt(picker.value, 10)); });
    }
    q(".gl-branch-pick").hidden = !branches || branches.length < 2;
    slider.min = "0";
    slider.max = String(Math.max(0, n - 1));
    slider.addEventListener("input", function () { self.select(parseInt(slider.value, 10)); });
    q(".gl-prev").addEventListener("click", function () { self.select(self.index - 1); });
    q(".gl-next").addEventListener("click", function () { self.select(self.index + 1); });
    eventsAll.addEventListener("change", function () { events(self.index); });
    PANELS.forEach(function (panel) { panel(section, run, self); });
    if (n) this.select(n - 1); else label.textContent = "no checkpoints yet";
  }

  function header(section, run) {
    var h = section.querySelector(".gl-head");
    var shown = run.branches && run.branches.length ? run.branches[0].seqs.length : run.checkpoints.length;
    var bits = ["graph " + run.graph + "@" + run.revision, "status " + run.status, "head " + run.head,
      shown + " checkpoints on " + (run.upto !== null && run.upto !== undefined ? "this branch" : "the head's branch")];
    if (run.branches && run.branches.length > 1) bits.push(run.branches.length + " branches (pick one above the timeline)");
    if (run.parallel) bits.push("parallel: each checkpoint is a super-step, its whole frontier lit");
    if (run.upto !== null && run.upto !== undefined) bits.push("branch ending at checkpoint " + run.upto);
    if (run.parent_run) bits.push("forked from " + run.parent_run + "@" + run.parent_seq);
    if (run.child_of) bits.push("subgraph child of " + run.child_of.run + " at station " + run.child_of.node);
    h.appendChild(el("p", "gl-sub", bits.join(" \u00b7 ")));
    if (run.error) h.appendChild(el("p", "gl-error", "station " + run.error.node_id + " failed: " + (run.error.type || "") + ": " + (run.error.message || "")));
    if (run.status === "done") h.appendChild(el("p", null, "output: " + show(run.output, 400)));
  }
  function waits(section, run, viewer) {
    var box = section.querySelector(".gl-waits");
    box.appendChild(el("h3", null, "Waits (" + run.waits.length + ")"));
    if (!run.waits.length) { box.appendChild(el("p", "gl-note", "this run never waited")); return; }
    box.appendChild(table(["kind", "station", "checkpoint", "prompt", "details", "verdict", "note", "asked", "answered", ""],
      run.waits.map(function (w) {
        var go = el("button", "gl-go", "show");
        go.addEventListener("click", function () { viewer.show(w.cp); });
        return { cells: [w.kind, w.node, w.cp, w.prompt, w.details === null ? "" : show(w.details), verdict(w),
          w.resolution && w.resolution.note ? w.resolution.note : "", w.at, w.resolved_at, go] };
      })));
  }
  function children(section, run) {
    var box = section.querySelector(".gl-children");
    if (!run.children.length) return;
    box.appendChild(el("h3", null, "Subgraph children (" + run.children.length + ")"));
    var ul = el("ul");
    run.children.forEach(function (c) {
      var li = el("li"), a = el("a", null, "run " + c.run);
      a.setAttribute("href", "#run-" + c.run);
      a.addEventListener("click", function () {
        var d = document.getElementById("run-" + c.run);
        if (d && d.tagName === "DETAILS") d.open = true;
      });
      li.appendChild(document.createTextNode("station " + c.node + ": graph " + c.graph + ", "));
      li.appendChild(a);
      ul.appendChild(li);
    });
    box.appendChild(ul);
  }
  function calls(section, run, viewer) {  // recorded calls (docs/replay.md): live or replayed, tokens saved
    var box = section.querySelector(".gl-calls"), list = run.calls || [];
    var live = list.filter(function (c) { return c.mode === "live"; }).length;
    var saved = list.reduce(function (s, c) { return s + (c.saved_tokens || 0); }, 0);
    box.appendChild(el("h3", null, "Recorded calls (" + list.length + ")"));
    if (!list.length) { box.appendChild(el("p", "gl-note", "no recorded calls")); return; }
    box.appendChild(el("p", "gl-sub", live + " live · " + (list.length - live) + " replayed · " + saved + " tokens saved" +
      (list.length > 1000 ? " (the first 1000 shown)" : "")));
    box.appendChild(table(["station", "from checkpoint", "entered", "call", "mode", "tokens", "tokens saved", "ms", "at", ""],
      list.slice(0, 1000).map(function (c) {
        var go = el("button", "gl-go", "show");
        go.addEventListener("click", function () { viewer.show(c.cp); });
        return { cls: "gl-call-" + c.mode, cells: [c.node, c.cp, c.attempt == null ? "-" : "event " + c.attempt, c.kind + " " + c.name + " #" + c.index,
          c.mode === "replayed" ? "↺ replayed" : "● live", c.tokens, c.saved_tokens, c.ms, c.at, go] };
      })));
  }
  var PANELS = [header, waits, calls, children];

  window.glViewers = [];
  document.querySelectorAll("[data-run-index]").forEach(function (section) {
    var run = doc.runs[parseInt(section.getAttribute("data-run-index"), 10)];
    window.glViewers.push(new Viewer(section, run));
  });
  document.documentElement.setAttribute("data-gl-ready", "1");
})();
""".strip()
