// The report page's label rules (assets/report/labels.js) against the cases the Rust rules are
// tested against (tests/display_label_cases.json, read by tests/suite/display_labels.rs too): the
// text the page shows for the words it merges (`visible`) and for repeated labels
// (`positioned`). Needs only node: `node --test labels.test.mjs` (run by `cargo test` through
// tests/suite/display_labels.rs).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

const root = new URL('../../', import.meta.url);
const source = readFileSync(new URL('crates/render/assets/report/labels.js', root), 'utf8');
// The page joins its script files into one function scope; here the file gets its own.
const { visibleText, positionedLabels, subscriptDigits } = new Function(
  source + '\nreturn { visibleText, positionedLabels, subscriptDigits };',
)();
const cases = JSON.parse(readFileSync(new URL('tests/display_label_cases.json', root), 'utf8'));

test('the cases file has cases of both rules', () => {
  assert.ok(cases.visible.length >= 10, cases.visible.length + ' visible cases');
  assert.ok(cases.positioned.length >= 3, cases.positioned.length + ' positioned cases');
});

for (const c of cases.visible) {
  test('visible: ' + JSON.stringify(c.text), () => {
    assert.equal(visibleText(c.text), c.display);
  });
}

for (const c of cases.positioned) {
  test('positioned: ' + JSON.stringify(c.labels), () => {
    assert.deepEqual(positionedLabels(c.labels, c.positions), c.named);
  });
}

// The display cases of plain labels are the visible rule applied to the label (special tokens
// aside, which keep their names): what the page shows for labels that came without display texts.
for (const c of cases.display.filter((d) => d.scheme === 'plain' && !['start', 'end', 'pad', 'special'].includes(d.role))) {
  test('plain label: ' + JSON.stringify(c.piece), () => {
    assert.equal(visibleText(c.piece), c.display);
  });
}

test('subscript digits', () => {
  assert.equal(subscriptDigits(107), '₁₀₇');
});
