/* attnviz report: which tokens form a word, and what the word is called. The same rule as the
 * Rust merge (src/analysis/words.rs); both are tested against tests/word_merge_cases.json (the
 * page's copy by tests/browser/words.test.mjs). Pure functions of the data only: `data` holds the
 * per-token arrays of the report's metadata (tokens, roles, segments, word_ids, surfaces,
 * generated), so any source of attention that fills them merges the same way.
 */

/** Whether a role (as the metadata names it) is a special token's. */
function isSpecialRole(role) {
  return role === 'start' || role === 'end' || role === 'pad' || role === 'special';
}

/** Word key of token i (segment, word id, generated or not), or null for a token that stands alone. */
function wordKeyOf(data, i) {
  const w = data.word_ids[i];
  if (w === null || w === undefined || isSpecialRole(data.roles[i])) return null;
  const generated = data.generated && data.generated[i] ? 'g' : 'p';
  return data.segments[i] + ':' + w + ':' + generated;
}

/**
 * The label of a word made of `tokens`: the text they stand for (their surfaces joined), without
 * the whitespace around it; when that is empty (a special token, a lone space token) their labels
 * joined.
 */
function wordLabel(data, tokens) {
  let text = '';
  for (const i of tokens) text += data.surfaces ? (data.surfaces[i] || '') : '';
  text = text.trim();
  if (text !== '') return text;
  let label = '';
  for (const i of tokens) label += data.tokens[i];
  return label;
}

/**
 * The units shown for the tokens `keep` (in order): one per token, or with `merge` one per word
 * (consecutive kept tokens with the same word key). Each unit is {tokens: [indices], label}; a
 * merged view labels every unit by its text (wordLabel), a token view by the token.
 */
function groupUnits(data, keep, merge) {
  const list = [];
  let prev = null;
  for (const i of keep) {
    const key = merge ? wordKeyOf(data, i) : null;
    if (key !== null && key === prev) list[list.length - 1].tokens.push(i);
    else list.push({ tokens: [i], label: '' });
    prev = key;
  }
  for (const u of list) u.label = merge ? wordLabel(data, u.tokens) : data.tokens[u.tokens[0]];
  return list;
}
