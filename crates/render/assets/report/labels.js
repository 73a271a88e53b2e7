/* attnviz report: how a label is shown. The report's metadata carries each token's raw piece
 * (`tokens`) and its display text (`display`, decoded by src/attention/display.rs: `Ġquick` →
 * `quick`, `Ċ` → `↵`, partial bytes as `⟨C3⟩`); the page applies the two rules it needs itself,
 * the same as that file's `visible` and `positioned`: to the words it merges and to labels that
 * repeat. Both are tested against tests/display_label_cases.json (the page's copy by
 * tests/browser/labels.test.mjs). Pure functions.
 */

/** Characters shown as ⟨U+XXXX⟩: control, format and unusual space characters (not the space,
 *  line feed, tab, or the joiners inside emoji). */
const INVISIBLE_CHAR = /^[\p{Cc}\p{Cf}\p{White_Space}]$/u;
const WHITE_SPACE = /^\p{White_Space}$/u;
function isInvisibleChar(c) {
  if (c === ' ' || c === '\n' || c === '\t' || c === '\u200c' || c === '\u200d') return false;
  return INVISIBLE_CHAR.test(c);
}
function codePoint(c) {
  return '⟨U+' + c.codePointAt(0).toString(16).toUpperCase().padStart(4, '0') + '⟩';
}

/**
 * `text` with what a reader cannot see made visible: the word-initial space dropped when there
 * is anything else, other spaces that are not between two visible characters as `·`, `↵` for a
 * line feed, `⇥` for a tab, `⟨U+XXXX⟩` for other control, format and unusual space characters.
 */
function visibleText(text) {
  let chars = Array.from(text);
  const shows = (c) => c !== undefined && !WHITE_SPACE.test(c);
  if (chars.some(shows) && chars[0] === ' ') chars = chars.slice(1);
  let out = '';
  chars.forEach((c, i) => {
    if (c === ' ') out += i > 0 && shows(chars[i - 1]) && shows(chars[i + 1]) ? ' ' : '·';
    else if (c === '\n') out += '↵';
    else if (c === '\t') out += '⇥';
    else if (isInvisibleChar(c)) out += codePoint(c);
    else out += c;
  });
  return out;
}

/** `n` in subscript digits (17 → ₁₇). */
function subscriptDigits(n) {
  return String(n).replace(/[0-9]/g, (d) => String.fromCharCode(0x2080 + Number(d)));
}

/** `labels` with each one that occurs more than once followed by its position in subscript
 *  digits (`C`, `C` → `C₀`, `C₁`); `positions[i]` is the number unit i goes by. */
function positionedLabels(labels, positions) {
  const counts = new Map();
  for (const l of labels) counts.set(l, (counts.get(l) || 0) + 1);
  return labels.map((l, i) => (counts.get(l) > 1 ? l + subscriptDigits(positions[i]) : l));
}
