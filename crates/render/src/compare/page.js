(function () {
"use strict";
const data = JSON.parse(document.getElementById("compare-data").textContent);
const L = data.layers, H = data.heads;
const rows = data.row_labels, cols = data.col_labels;
const nq = rows.length, nk = cols.length;
let sel = { layer: data.start[0], head: data.start[1] };
const css = (name) => getComputedStyle(document.documentElement).getPropertyValue(name).trim();

// viridis at 9 stops, and matplotlib's RdBu reversed at 11 (the figures' colour maps).
const VIRIDIS = [[68,1,84],[71,44,122],[59,81,139],[44,113,142],[33,144,141],[39,173,129],[92,200,99],[170,220,50],[253,231,37]];
const RDBU = [[5,48,97],[33,102,172],[67,147,195],[146,197,222],[209,229,240],[247,247,247],[253,219,199],[244,165,130],[214,96,77],[178,24,43],[103,0,31]];
function ramp(table, t) {
  t = Math.min(1, Math.max(0, isFinite(t) ? t : 0));
  const p = t * (table.length - 1), i = Math.min(table.length - 2, Math.floor(p)), f = p - i;
  const c = table[i].map((v, k) => Math.round(v + (table[i + 1][k] - v) * f));
  return "rgb(" + c.join(",") + ")";
}
const seq = (t) => ramp(VIRIDIS, t);
const div = (t) => ramp(RDBU, (t + 1) / 2);

function setup(canvas, w, h) {
  const r = window.devicePixelRatio || 1;
  canvas.width = Math.ceil(w * r);
  canvas.height = Math.ceil(h * r);
  canvas.style.width = w + "px";
  canvas.style.height = h + "px";
  const g = canvas.getContext("2d");
  g.setTransform(r, 0, 0, r, 0, 0);
  g.font = "12px system-ui, sans-serif";
  return g;
}

function fillLines(id, lines) {
  const el = document.getElementById(id);
  for (const line of lines) {
    const d = document.createElement("div");
    d.textContent = line;
    el.appendChild(d);
  }
}
fillLines("lines", data.lines);
fillLines("notes", data.notes);
fillLines("mask-notes", data.mask_notes);

// The distance heatmap.
const maxD = Math.max(1e-6, ...data.ranked.map((h) => h.distance));
const dc = document.getElementById("distance");
const DCELL = Math.max(14, Math.min(36, Math.floor(420 / Math.max(L, H))));
const DLEFT = 64, DTOP = 18;
function drawDistance() {
  const g = setup(dc, DLEFT + H * DCELL + 70, DTOP + L * DCELL + 8);
  g.fillStyle = css("--fg");
  g.textBaseline = "middle";
  g.textAlign = "center";
  for (let h = 0; h < H; h++) if (DCELL >= 18 || h % 2 === 0) g.fillText(String(h), DLEFT + h * DCELL + DCELL / 2, DTOP / 2);
  g.textAlign = "right";
  for (let l = 0; l < L; l++) {
    g.fillStyle = css("--fg");
    g.fillText("layer " + data.layer_names[l], DLEFT - 6, DTOP + l * DCELL + DCELL / 2);
    for (let h = 0; h < H; h++) {
      const d = data.distance[l][h];
      g.fillStyle = d === null ? css("--bg") : seq(d / maxD);
      g.fillRect(DLEFT + h * DCELL, DTOP + l * DCELL, DCELL, DCELL);
    }
  }
  g.strokeStyle = css("--frame");
  g.strokeRect(DLEFT - 0.5, DTOP - 0.5, H * DCELL + 1, L * DCELL + 1);
  g.strokeStyle = css("--sel");
  g.lineWidth = 2;
  g.strokeRect(DLEFT + sel.head * DCELL + 1, DTOP + sel.layer * DCELL + 1, DCELL - 2, DCELL - 2);
  // The colour bar.
  const bx = DLEFT + H * DCELL + 12, bh = L * DCELL;
  for (let y = 0; y < bh; y++) {
    g.fillStyle = seq(1 - y / Math.max(1, bh - 1));
    g.fillRect(bx, DTOP + y, 10, 1);
  }
  g.fillStyle = css("--fg");
  g.textAlign = "left";
  g.fillText(maxD.toFixed(3), bx + 14, DTOP + 4);
  g.fillText("0", bx + 14, DTOP + bh - 4);
}
dc.addEventListener("click", (e) => {
  const r = dc.getBoundingClientRect();
  const h = Math.floor((e.clientX - r.left - DLEFT) / DCELL), l = Math.floor((e.clientY - r.top - DTOP) / DCELL);
  if (l >= 0 && l < L && h >= 0 && h < H) select(l, h);
});
dc.addEventListener("keydown", (e) => {
  const moves = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };
  const m = moves[e.key];
  if (!m) return;
  e.preventDefault();
  select(Math.min(L - 1, Math.max(0, sel.layer + m[0])), Math.min(H - 1, Math.max(0, sel.head + m[1])));
});

// The ranking.
const ranked = document.getElementById("ranked");
const rankButtons = [];
for (const hd of data.ranked.slice(0, 20)) {
  const li = document.createElement("li");
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = "layer " + data.layer_names[hd.layer] + " head " + hd.head + " · " + hd.distance.toFixed(4);
  b.addEventListener("click", () => select(hd.layer, hd.head));
  b.dataset.layer = hd.layer;
  b.dataset.head = hd.head;
  li.appendChild(b);
  ranked.appendChild(li);
  rankButtons.push(b);
}

// The matrices.
const CELL = Math.max(4, Math.min(26, Math.floor(300 / Math.max(nq, nk))));
const LABELS = CELL >= 11;
function labelWidth(labels) {
  const g = document.createElement("canvas").getContext("2d");
  g.font = "12px system-ui, sans-serif";
  return LABELS ? Math.min(140, Math.ceil(Math.max(0, ...labels.map((s) => g.measureText(s).width)))) + 8 : 4;
}
const LEFT = labelWidth(rows), BOTTOM = labelWidth(cols);
/** Hatch the cells where `vis` is 0 as the report does (src/render/image/paint.rs, the
 *  report's matrix view): the page background crossed by thin diagonal lines in --hatch, 4 px
 *  apart, continuous across neighbouring cells. */
function hatchCells(g, vis) {
  g.save();
  g.beginPath();
  let any = false;
  for (let q = 0; q < nq; q++) for (let k = 0; k < nk; k++) {
    if (vis[q * nk + k]) continue;
    g.rect(LEFT + k * CELL, q * CELL, CELL, CELL);
    any = true;
  }
  if (!any) { g.restore(); return false; }
  g.clip();
  g.fillStyle = css("--bg");
  g.fillRect(LEFT, 0, nk * CELL, nq * CELL);
  g.strokeStyle = css("--hatch");
  g.lineWidth = 1;
  g.beginPath();
  const w = nk * CELL, h = nq * CELL;
  for (let d = -h; d < w; d += 4) {
    g.moveTo(LEFT + d, h);
    g.lineTo(LEFT + d + h, 0);
  }
  g.stroke();
  g.restore();
  return true;
}
function drawMatrix(canvas, values, color, vis) {
  const g = setup(canvas, LEFT + nk * CELL + 2, nq * CELL + BOTTOM + 2);
  for (let q = 0; q < nq; q++) for (let k = 0; k < nk; k++) {
    const i = q * nk + k;
    if (!vis[i]) continue;
    g.fillStyle = color(values[i]);
    g.fillRect(LEFT + k * CELL, q * CELL, CELL, CELL);
  }
  const hatched = hatchCells(g, vis);
  g.strokeStyle = css("--frame");
  g.lineWidth = 1;
  g.strokeRect(LEFT - 0.5, -0.5 + 1, nk * CELL + 1, nq * CELL);
  if (LABELS) {
    g.fillStyle = css("--fg");
    g.textBaseline = "middle";
    g.textAlign = "right";
    rows.forEach((s, q) => g.fillText(s, LEFT - 4, q * CELL + CELL / 2, 136));
    g.save();
    g.rotate(-Math.PI / 2);
    cols.forEach((s, k) => g.fillText(s, -(nq * CELL + 4), LEFT + k * CELL + CELL / 2, 136));
    g.restore();
  }
  return hatched;
}
// The key to the hatch, drawn as the cells are.
(function () {
  const c = document.getElementById("mask-swatch"), g = c.getContext("2d");
  g.fillStyle = css("--bg");
  g.fillRect(0, 0, 14, 14);
  g.fillStyle = css("--hatch");
  for (let y = 0; y < 14; y++) for (let x = 0; x < 14; x++) if ((x + y) % 4 === 0) g.fillRect(x, y, 1, 1);
})();
const ca = document.getElementById("matrix-a"), cb = document.getElementById("matrix-b"), cd = document.getElementById("matrix-d");
let current = null;
function select(layer, head) {
  sel = { layer, head };
  const a = data.a_weights[layer][head], b = data.b_weights[layer][head];
  const va = data.a_visible[layer], vb = data.b_visible[layer], vis = data.visible[layer];
  // A − B is taken of each row's shares of the keys both can attend when the masks differ.
  const sa = data.a_shares ? data.a_shares[layer][head] : a, sb = data.b_shares ? data.b_shares[layer][head] : b;
  const d = sa.map((x, i) => (vis[i] ? x - sb[i] : 0));
  const max = Math.max(1e-6, ...a.filter((_, i) => va[i]), ...b.filter((_, i) => vb[i]));
  const dmax = Math.max(1e-6, ...d.map(Math.abs));
  current = { a, b, sa, sb, d, va, vb, vis };
  const hatched = [drawMatrix(ca, a, (v) => seq(v / max), va), drawMatrix(cb, b, (v) => seq(v / max), vb), drawMatrix(cd, d, (v) => div(v / dmax), vis)];
  document.getElementById("mask-key").hidden = !hatched.some(Boolean);
  // Which panels hatch cells (for tests): "a", "b", "d" (A − B).
  document.body.dataset.hatched = ["a", "b", "d"].filter((_, i) => hatched[i]).join(",");
  const js = data.distance[layer][head];
  document.getElementById("head-title").textContent = "Layer " + data.layer_names[layer] + " head " + head +
    (js === null ? "" : " · JS distance " + js.toFixed(4)) + " · A and B up to " + max.toFixed(3) + ", A − B ±" + dmax.toFixed(3);
  for (const btn of rankButtons) btn.setAttribute("aria-current", String(+btn.dataset.layer === layer && +btn.dataset.head === head));
  drawDistance();
  document.body.dataset.layer = layer;
  document.body.dataset.head = head;
}
for (const canvas of [ca, cb, cd]) {
  canvas.addEventListener("mousemove", (e) => {
    const r = canvas.getBoundingClientRect();
    const k = Math.floor((e.clientX - r.left - LEFT) / CELL), q = Math.floor((e.clientY - r.top) / CELL);
    if (!current || q < 0 || q >= nq || k < 0 || k >= nk) return;
    const i = q * nk + k, c = current;
    const side = (name, v, seen) => name + " " + (seen ? v.toFixed(4) : "masked");
    let text = rows[q] + " → " + cols[k] + ":  " + side("A", c.a[i], c.va[i]) + "  " + side("B", c.b[i], c.vb[i]);
    if (!c.vis[i]) text += "  A − B not compared (masked on one side)";
    else if (data.masks_differ) text += "  ·  shares of the keys both can attend: A " + c.sa[i].toFixed(4) + "  B " + c.sb[i].toFixed(4) + "  A − B " + c.d[i].toFixed(4);
    else text += "  A − B " + c.d[i].toFixed(4);
    document.getElementById("cell").textContent = text;
  });
}
select(sel.layer, sel.head);
})();
