// The report page's word merge (assets/report/words.js) against the cases the Rust merge is
// tested against (tests/word_merge_cases.json, read by tests/suite/word_merge.rs too). Needs only
// node: `node --test words.test.mjs` (run by `cargo test` through tests/suite/word_merge.rs).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

const root = new URL('../../', import.meta.url);
const source = readFileSync(new URL('crates/render/assets/report/words.js', root), 'utf8');
// The page joins its script files into one function scope; here the file gets its own.
const { groupUnits, wordLabel, isSpecialRole } = new Function(
  source + '\nreturn { groupUnits, wordLabel, isSpecialRole };',
)();
const { cases } = JSON.parse(readFileSync(new URL('tests/word_merge_cases.json', root), 'utf8'));

test('the cases file has cases', () => {
  assert.ok(cases.length >= 8, cases.length + ' cases');
});

for (const c of cases) {
  test('merge: ' + c.name, () => {
    const keep = c.keep || c.tokens.map((_, i) => i);
    const words = groupUnits(c, keep, true);
    assert.deepEqual(words.map((u) => u.tokens), c.words.map((w) => w.tokens));
    assert.deepEqual(words.map((u) => u.label), c.words.map((w) => w.label));
    // Unmerged, every kept token is its own unit, labelled as the tokenizer gave it.
    const tokens = groupUnits(c, keep, false);
    assert.deepEqual(tokens.map((u) => u.tokens), keep.map((i) => [i]));
    assert.deepEqual(tokens.map((u) => u.label), keep.map((i) => c.tokens[i]));
  });
}

test('special roles are the four the Rust value calls special', () => {
  assert.deepEqual(
    ['start', 'end', 'pad', 'special', 'word', 'piece'].map(isSpecialRole),
    [true, true, true, true, false, false],
  );
  assert.equal(wordLabel({ tokens: ['[CLS]'], surfaces: [''] }, [0]), '[CLS]');
});
