#!/usr/bin/env python3
"""Static scores for the Wikipedia passages: `docid<TAB>score` lines with score 1/(1 + passage number)
(passages.py numbers an article's passages `article#0`, `article#1`, ...), the file `warpsearch index
--static-scores` and `warpsearch synth --static-scores` take. A lead passage scores 1, later ones less.

usage: python3 bench/static_scores.py passages.jsonl > static.tsv
"""

import json
import sys


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    out = sys.stdout
    with open(sys.argv[1], encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            docid = json.loads(line)["id"]
            article, sep, passage = docid.rpartition("#")
            if not sep or not passage.isdigit():
                sys.exit(f"{sys.argv[1]}, line {number}: id {docid!r} is not `article#n` (passages.py's ids)")
            out.write(f"{docid}\t{1 / (1 + int(passage))}\n")


if __name__ == "__main__":
    main()
