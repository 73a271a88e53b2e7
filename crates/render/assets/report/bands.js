/* attnviz report: a vision-language model's pictures as bands of the matrix views. The same rule
 * as the Rust banding (src/band.rs in the render crate): each collapsed picture's units become
 * one unit labelled by the picture and its grid (`picture 1 · 24×24`); its column is the sum of a
 * row's attention to them and its row the mean of their rows, which units() and unitsFromTokens
 * (data.js) do for any unit of several tokens, as they do for words. Pure functions of the data.
 */

/** The pictures of the report's metadata that lie within its `n` units: {first, count, label,
 *  grid, bidirectional} each, in order. */
function picturesOf(m, n) {
  const list = Array.isArray(m.pictures) ? m.pictures : [];
  return list.filter((p) => Number.isInteger(p.first) && Number.isInteger(p.count) && p.count > 0 && p.first + p.count <= n);
}

/** The picture (its index in `pictures`) that token i belongs to, or -1. */
function pictureOfToken(pictures, i) {
  return pictures.findIndex((p) => i >= p.first && i < p.first + p.count);
}

/**
 * `list` (units as groupUnits makes them, {tokens, label}) with the units of each picture whose
 * `expanded[p]` is not true merged into one, labelled `pictures[p].label`. Every unit of a picture,
 * merged or not, says which picture it is of (`picture`); a merged one is a band (`band: true`).
 */
function bandUnits(list, pictures, expanded) {
  if (!pictures.length) return list;
  const out = [];
  let prev = -1;
  for (const u of list) {
    const p = pictureOfToken(pictures, u.tokens[0]);
    if (p >= 0) u.picture = p;
    if (p >= 0 && !expanded[p]) {
      if (p === prev) {
        out[out.length - 1].tokens.push(...u.tokens);
      } else {
        out.push({ tokens: u.tokens.slice(), label: pictures[p].label, picture: p, band: true });
      }
    } else {
      out.push(u);
    }
    prev = p >= 0 && !expanded[p] ? p : -1;
  }
  return out;
}
