"""Write the four party tables of the LaLonde 2x2 example (run from this folder).

Row groups: subjects split at random in two halves (seed 0), as ``collabcausal simulate`` does;
column groups: (age, married, education, nodegree) and (hispanic, black, re74, re75). Every party
of a row group holds the treatment and outcome (label holder) and a subject id column.

It also writes ``anchor.key``, the study's anchor key that every party reads (``[anchor]`` in each
party.toml) and the analyst never gets: in a real study one party makes it with
``collabcausal certs anchor-key --out anchor.key`` and hands it to the others out of band.
``python prepare.py --simulation-key`` writes the simulation key of seed 0 instead, which anyone can
rebuild: the study then reproduces ``collabcausal simulate --dataset lalonde``'s W-clb numbers (the
anchor, drawn from the key and the study id, is what differs between a simulation and a real study).
"""

import sys
from pathlib import Path

from collabcausal.anchor_key import simulation_anchor_key
from collabcausal.party.anchor import new_anchor_key
from collabcausal.party.secret_keys import write_key_file
from collabcausal.simulations.datasets import load_lalonde
from collabcausal.simulations.partition import partition_grid

here = Path(__file__).resolve().parent
if "--simulation-key" in sys.argv[1:]:
    write_key_file(here / "anchor.key", simulation_anchor_key(0))
    print("anchor.key: the SIMULATION key of seed 0 (anyone can rebuild it): the study now gives the numbers of "
          "`collabcausal simulate --dataset lalonde` (same study id, anchor, r, m~ and seed); never in a real study")
elif not (here / "anchor.key").exists():
    new_anchor_key(here / "anchor.key")
    print("anchor.key: a new random anchor key, the study's secret: every party reads it ([anchor] in each "
          "party.toml), the analyst never gets it; it keeps out of git (.gitignore)")
else:
    print("anchor.key: kept (it exists); delete it for a new random key")
dataset = load_lalonde()
partition = partition_grid(dataset, 2, seed=0)
for i, rows in enumerate(partition.row_groups):
    block = dataset.frame.iloc[rows].reset_index(drop=True)
    block.insert(0, "id", [f"S{r:05d}" for r in rows])
    for j, columns in enumerate(partition.column_groups):
        name = partition.name(i, j)
        path = here / name / f"{name}.csv"
        block[["id", *columns, dataset.treatment, dataset.outcome]].to_csv(path, index=False)
        print(f"{path.relative_to(here)}: {len(block)} subjects, columns {list(columns)}")
