"""Write the hostile chat-template cases of issue 20 (requirement 11) into a folder, one case
folder each (the format of `scripts/measure-hostile.sh`'s header).

    python3 scripts/hostile/chat.py OUT

Standard library only. Each case is a copy of the tiny Qwen2 model folder
(tests/fixtures/tiny-qwen2, 172 KB) whose tokenizer_config.json carries a hostile
`chat_template`, and an `args` file that runs it with `--chat`. A GGUF's
`tokenizer.chat_template` goes through the same renderer (crates/model/src/formats/gguf/chat.rs), so one
source is enough to measure. attnviz must refuse each one in one line, quickly and with bounded
memory; the Rust tests (tests/suite/chat_templates.rs) build the same cases.

- tojson-indent-1e11: `tojson(indent=100000000000)`, 100 GB of spaces.
- nested-100k-tojson / -print / -concat / -compare / -drop: a list nested 100,000 deep (built
  with a namespace in a loop, ten levels an iteration), then written with tojson, printed,
  joined to a string with `~`, compared with itself, or only dropped.
- nested-10k-tojson / -print: the same 10,000 deep (within the fuel), written or printed.
- nested-40k-concat / -compare / -drop: 40,000 deep (close to what the fuel can build), then
  joined, compared or dropped: minijinja recurses through it on the rendering thread's stack.
- format-width-4e9: `'{:>4000000000}'.format('x')`, 4 GB of padding.
- format-precision-1e9: `'{:.1000000000f}'.format(1.5)`, 1 GB of zeros.
- doubling-concat: a string doubled 40 times with `~` (2**40 bytes).
- output-flood: two loops that write 10**8 bytes of output.
- repeat-1e8: `'x' * 100000000` printed 40 times.
"""
import json
import os
import shutil
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(REPO, "tests", "fixtures", "tiny-qwen2")

def nest(depth):
    """A list nested `depth` deep, ten levels a loop iteration."""
    return (
        "{% set ns = namespace(x=[]) %}"
        "{% for i in range(" + str(depth // 10) + ") %}"
        "{% set ns.x = [[[[[[[[[[ns.x]]]]]]]]]] %}{% endfor %}"
    )


NEST = nest(100000)

CASES = {
    "tojson-indent-1e11": "{{ messages | tojson(indent=100000000000) }}",
    "nested-100k-tojson": NEST + "{{ ns.x | tojson }}",
    "nested-100k-print": NEST + "{{ ns.x }}",
    "nested-100k-concat": NEST + "{{ (ns.x ~ '') | length }}",
    "nested-100k-compare": NEST + "{{ ns.x == ns.x }}",
    "nested-100k-drop": NEST + "{{ messages[0]['content'] }}",
    "nested-10k-tojson": nest(10000) + "{{ ns.x | tojson }}",
    "nested-10k-print": nest(10000) + "{{ ns.x }}",
    "nested-40k-concat": nest(40000) + "{{ (ns.x ~ '') | length }}",
    "nested-40k-compare": nest(40000) + "{{ ns.x == ns.x }}",
    "nested-40k-drop": nest(40000) + "{{ messages[0]['content'] }}",
    "format-width-4e9": "{{ '{:>4000000000}'.format('x') }}",
    "format-precision-1e9": "{{ '{:.1000000000f}'.format(1.5) }}",
    "doubling-concat": (
        "{% set ns = namespace(s='x') %}"
        "{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}"
    ),
    "output-flood": (
        "{% for i in range(1000) %}{% for j in range(1000) %}" + "x" * 100 + "{% endfor %}{% endfor %}"
    ),
    "repeat-1e8": "{% for i in range(40) %}{{ 'x' * 100000000 }}{% endfor %}",
}


def write_case(out, name, template):
    case = os.path.join(out, name)
    shutil.copytree(MODEL, case)
    config_path = os.path.join(case, "tokenizer_config.json")
    with open(config_path, encoding="utf-8") as f:
        config = json.load(f)
    config["chat_template"] = template
    with open(config_path, "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False, indent=1)
    os.remove(os.path.join(case, "chat_template.jinja"))
    with open(os.path.join(case, "args"), "w", encoding="utf-8") as f:
        f.write("\n".join(["-m", "{case}", "hi", "--chat", "--json", "{out}/a.json"]) + "\n")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, template in CASES.items():
        write_case(out, name, template)
        print(name)


if __name__ == "__main__":
    main()
